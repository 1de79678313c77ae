"""The driver JVM's options a session is started with (streaming_apps.spark_session; docs/deployment.md "Start-up"),
and which apps ask for the C1 compiler only (AppConfig.c1_only_jit) or the parallel collector
(AppConfig.parallel_gc)."""

from streaming_apps.spark_session import C1_ONLY_JIT, PARALLEL_GC, driver_java_options_conf

CDS = "-XX:SharedArchiveFile=/c/spark.jsa -Xshare:auto"


def test_cds_then_c1_only_jit_then_the_users_own_options():
    assert driver_java_options_conf("-Dx=1", cds=CDS, c1_only_jit=True) == f"{CDS} {C1_ONLY_JIT} -Dx=1"


def test_no_jit_option_unless_asked():
    assert driver_java_options_conf("", cds=CDS, c1_only_jit=False) == CDS
    assert driver_java_options_conf("", cds=None, c1_only_jit=False) == ""


def test_the_users_own_jit_choice_wins():
    for own in ("-XX:TieredStopAtLevel=4", "-XX:-TieredCompilation"):
        assert driver_java_options_conf(own, cds=None, c1_only_jit=True) == own


def test_the_direct_landing_and_gold_run_with_c1_only_and_the_spark_landing_keeps_c2(tmp_path):
    from streaming_apps.apps import AppConfig

    def c1(app, **kw):
        return AppConfig(app=app, brokers="broker-a=127.0.0.1:10912", workdir=tmp_path, **kw).c1_only_jit

    assert c1("bronze") and c1("silver"), "the deltalake sink's default landing is direct"
    assert c1("gold") and c1("gold", sink="delta"), "gold's JVM recompiles its aggregation every batch"
    assert not c1("bronze", landing="spark") and not c1("bronze", sink="delta")


def test_the_parallel_collector_follows_the_jit_choice_and_precedes_the_users_own_options():
    assert driver_java_options_conf("-Dx=1", cds=CDS, c1_only_jit=True, parallel_gc=True) == \
        f"{CDS} {C1_ONLY_JIT} {PARALLEL_GC} -Dx=1"
    assert driver_java_options_conf("", cds=None, c1_only_jit=False, parallel_gc=True) == PARALLEL_GC


def test_the_users_own_collector_wins():  # the JVM refuses two collectors ("Conflicting collector combinations")
    for own in ("-XX:+UseG1GC", "-Xmx4g -XX:+UseZGC", "-XX:-UseParallelGC", "-XX:+UseShenandoahGC"):
        assert driver_java_options_conf(own, cds=None, c1_only_jit=False, parallel_gc=True) == own
    assert PARALLEL_GC in driver_java_options_conf("-XX:+UseStringDeduplication", cds=None, c1_only_jit=False,
                                                   parallel_gc=True), "not a collector choice"


def test_only_gold_asks_for_the_parallel_collector(tmp_path):
    from streaming_apps.apps import AppConfig

    def parallel(app, **kw):
        return AppConfig(app=app, brokers="broker-a=127.0.0.1:10912", workdir=tmp_path, **kw).parallel_gc

    assert parallel("gold") and parallel("gold", sink="delta")
    assert not parallel("bronze") and not parallel("silver") and not parallel("bronze", landing="spark")
