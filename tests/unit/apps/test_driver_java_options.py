"""The driver JVM's options a session is started with (streaming_apps.spark_session; docs/deployment.md "Start-up")."""

from streaming_apps.spark_session import C1_ONLY_JIT, driver_java_options_conf

CDS = "-XX:SharedArchiveFile=/c/spark.jsa -Xshare:auto"


def test_cds_then_c1_only_jit_then_the_users_own_options():
    assert driver_java_options_conf("-Dx=1", cds=CDS, c1_only_jit=True) == f"{CDS} {C1_ONLY_JIT} -Dx=1"


def test_no_jit_option_unless_asked():
    assert driver_java_options_conf("", cds=CDS, c1_only_jit=False) == CDS
    assert driver_java_options_conf("", cds=None, c1_only_jit=False) == ""


def test_the_users_own_jit_choice_wins():
    for own in ("-XX:TieredStopAtLevel=4", "-XX:-TieredCompilation"):
        assert driver_java_options_conf(own, cds=None, c1_only_jit=True) == own
