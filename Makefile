# The two set-up commands of the README: `make demo` and `make test`.
# Both create .venv and install the project into it when it is missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CDS_STAMP := $(VENV)/.spark-cds

.PHONY: demo test lint bench bytecode clean-venv check-java jvm-peers env-archive lock dist

# Real JVM peers for the interoperability tests and format("delta"): Maven stages the jars named in
# jvm/*.pom.xml into the git-ignored .jvm/<name>/lib (once; again when a pom changes). docs/real_peers.md
JVM_PEERS := .jvm/rocketmq-4.9/.staged .jvm/rocketmq-5/.staged .jvm/delta/.staged .jvm/s3proxy/.staged \
             .jvm/s3a/.staged .jvm/typed-bodies/.staged .jvm/spark-decoders/.staged
MVN_STAGE  = mvn -q -B -f $< dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(@D)/lib

.jvm/rocketmq-4.9/.staged: jvm/rocketmq-4.9.pom.xml
	@command -v mvn >/dev/null 2>&1 || { echo "staging the real RocketMQ peers needs Maven (Debian/Ubuntu: apt-get install maven)" >&2; exit 1; }
	rm -rf $(@D) && $(MVN_STAGE) && touch $@

.jvm/rocketmq-5/.staged: jvm/rocketmq-5.pom.xml
	@command -v mvn >/dev/null 2>&1 || { echo "staging the real RocketMQ peers needs Maven (Debian/Ubuntu: apt-get install maven)" >&2; exit 1; }
	rm -rf $(@D) && $(MVN_STAGE) && touch $@

.jvm/delta/.staged: jvm/delta.pom.xml
	@command -v mvn >/dev/null 2>&1 || { echo "staging the Delta jars needs Maven (Debian/Ubuntu: apt-get install maven)" >&2; exit 1; }
	rm -rf $(@D) && $(MVN_STAGE) -DexcludeTransitive=true && touch $@

# A real S3 server for the object-storage tests (one self-contained jar, kept off Spark's classpath) and Spark's
# s3a:// file system with the S3-safe checkpoint manager (hadoop-aws, the AWS SDK modules it links: 13 MB).
.jvm/s3proxy/.staged: jvm/s3proxy.pom.xml
	@command -v mvn >/dev/null 2>&1 || { echo "staging the S3Proxy server needs Maven (Debian/Ubuntu: apt-get install maven)" >&2; exit 1; }
	rm -rf $(@D) && $(MVN_STAGE) -DexcludeTransitive=true && touch $@

.jvm/s3a/.staged: jvm/s3a.pom.xml
	@command -v mvn >/dev/null 2>&1 || { echo "staging the s3a jars needs Maven (Debian/Ubuntu: apt-get install maven)" >&2; exit 1; }
	rm -rf $(@D) && $(MVN_STAGE) && touch $@

# Apache Avro's Java library and protobuf-java: the reference encoders of tests/interop/test_java_typed_bodies.py.
.jvm/typed-bodies/.staged: jvm/typed-bodies.pom.xml
	@command -v mvn >/dev/null 2>&1 || { echo "staging the Avro and protobuf-java jars needs Maven (Debian/Ubuntu: apt-get install maven)" >&2; exit 1; }
	rm -rf $(@D) && $(MVN_STAGE) && touch $@

# Spark's own from_avro (spark-avro; Spark provides Avro itself): bench/tables.py compares it with the tasks' decoders.
.jvm/spark-decoders/.staged: jvm/spark-decoders.pom.xml
	@command -v mvn >/dev/null 2>&1 || { echo "staging the spark-avro jar needs Maven (Debian/Ubuntu: apt-get install maven)" >&2; exit 1; }
	rm -rf $(@D) && $(MVN_STAGE) -DexcludeTransitive=true && touch $@

jvm-peers: $(JVM_PEERS)

# The project's own environment: pyproject.toml's ranges, resolved to the exact versions of requirements/lock.txt.
$(STAMP): pyproject.toml setup.py connector/decode/_decode_kernel.c connector/decode/_decode_locate.c \
		connector/decode/_encode_records.c connector/decode/_decode_kernel.h \
		requirements/lock.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "hareplica needs Python >= 3.11")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements/lock.txt -e '.[dev]'
	@touch $(STAMP)

# Re-resolve the locks after a range in pyproject.toml or a requirements/*.in changed: lock.txt keeps its versions
# unless they leave the ranges (uv prefers the pins already in an output file); the per-Spark locks of tests/compat
# are pyproject.toml's runtime ranges with the apps extra (a Spark runtime with `hareplica[apps]`) plus their .in
# file. README "Install into your Spark".
LOCK = $(BIN)/uv pip compile --quiet --python-version 3.11 --no-annotate --custom-compile-command 'make lock'
lock: $(STAMP)
	$(LOCK) pyproject.toml --extra dev -o requirements/lock.txt
	for v in 4.0 4.1 4.2 4.3; do $(LOCK) pyproject.toml --extra apps requirements/spark-$$v.in -o requirements/spark-$$v.txt || exit 1; done

# The sdist and the wheel (native decode kernel compiled in) that users install into their Spark: dist/
dist: $(STAMP)
	$(BIN)/python -m build --outdir dist .

# The Spark driver JVM's class-data-sharing archive (streaming_apps/jvm_cds.py; docs/deployment.md "Start-up").
# Built once per environment, and again when the training run, the archive's name or the SPARK_HOME view change;
# a failure only costs start-up time and is reported in one line.
$(CDS_STAMP): $(STAMP) streaming_apps/jvm_cds.py streaming_apps/spark_home.py streaming_apps/demo.py
	$(BIN)/python -m streaming_apps.jvm_cds
	@touch $@

# The project's own modules byte-compiled, as pip compiles a wheel it installs: the editable install leaves that to
# the first import, which writes nothing when PYTHONDONTWRITEBYTECODE is set, and then every Python process Spark
# starts compiles them again (docs/deployment.md §7, "Byte-compiled modules"). A no-op when nothing changed.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q connector broker_stub streaming_apps bench tests

check-java:
	@command -v java >/dev/null 2>&1 || { echo "hareplica needs Java 17 on PATH to run Spark: install it (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) and retry." >&2; exit 1; }

demo: check-java $(STAMP) $(CDS_STAMP) bytecode
	$(BIN)/hareplica demo

test: check-java $(STAMP) $(CDS_STAMP) $(JVM_PEERS) bytecode
	$(BIN)/python -m pytest -q -n 2 --dist loadscope --durations=25

# The packed environment Spark executors run hareplica from (--archives build/hareplica-env.tar.gz#environment).
# docs/deployment.md
env-archive: $(STAMP)
	$(BIN)/python -m streaming_apps.package --output build/hareplica-env.tar.gz

lint: $(STAMP)
	$(BIN)/ruff check .

bench: check-java $(STAMP) bytecode
	$(BIN)/python -m bench.replication
	$(BIN)/python -m bench.source
	$(BIN)/python -m bench.delta
	$(BIN)/python -m bench.catchup
	$(BIN)/python -m bench.bronze_profile

clean-venv:
	rm -rf $(VENV)
