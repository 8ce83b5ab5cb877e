# Shared set-up for scripts/run.sh and scripts/test.sh (sourced, not run): finds Python >= 3.11,
# creates .venv beside the project, and installs txmq with the extras named in $TXMQ_EXTRAS.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PYTHON=""
for candidate in "${TXMQ_PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
        "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
        PYTHON="$candidate"
        break
    fi
done
if [ -z "$PYTHON" ]; then
    echo "txmq needs Python >= 3.11 (set TXMQ_PYTHON to its path)." >&2
    exit 2
fi

if ! command -v java >/dev/null 2>&1; then
    echo "note: Java 17+ is not installed; Spark validation and TLC need it." >&2
    echo "      Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless" >&2
    JAVA_MISSING=1
else
    JAVA_MISSING=0
fi
export JAVA_MISSING

VENV="${TXMQ_VENV:-$ROOT/.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    echo "creating $VENV" >&2
    "$PYTHON" -m venv "$VENV"
fi
# Re-installing is cheap when nothing changed; the first run builds pyspark (about a minute).
stamp="$VENV/.txmq-installed-$(cat pyproject.toml | cksum | cut -d' ' -f1)-${TXMQ_EXTRAS}"
if [ ! -f "$stamp" ]; then
    echo "installing txmq[${TXMQ_EXTRAS}] into $VENV (first run takes a minute or two: pyspark is large)" >&2
    # uv installs what pip would, in parallel: measured here on a fresh cache, 37 s against pip's 82 s.
    # Where uv cannot be had, pip does it.
    if "$VENV/bin/python" -m pip install --quiet uv >&2 && [ -x "$VENV/bin/uv" ]; then
        install=("$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python")
    else
        "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
        install=("$VENV/bin/python" -m pip install --quiet)
    fi
    # `remoting` is no extra of pyproject.toml: the C++-based RocketMQ client (rocketmq-client-python
    # 0.5.0rc2, a manylinux wheel bundling librocketmq.so) has a package named `rocketmq`, as the 5.x gRPC
    # client of `serve` has, so it goes into a directory of its own (txmq/audit/cpp_client.py loads it).
    pip_extras="$(echo ",${TXMQ_EXTRAS}," | sed 's/,remoting,/,/g; s/^,//; s/,$//')"
    # pyspark is published as a source archive only. uv unpacks it (1.5 GB) and builds it (a minute of CPU)
    # and, behind a package proxy that does not answer its revalidation, does both again for every new
    # environment, keeping each copy in its cache: 58 fresh checkouts filled 50 GB here, and a disk over 90%
    # full makes upstream's broker refuse every message. So the wheel is built once, into txmq's per-user
    # cache, and installed from there before the rest, which then finds pyspark satisfied.
    if [[ ",${TXMQ_EXTRAS}," == *,spark,* ]]; then
        wheels="${XDG_CACHE_HOME:-${HOME}/.cache}/txmq/wheels"
        if ! compgen -G "$wheels/pyspark-*.whl" >/dev/null && mkdir -p "$wheels" 2>/dev/null; then
            pyspark_wanted="$("$VENV/bin/python" -c 'import tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["spark"]
print(next(d for d in extras if d.startswith("pyspark")))')"
            echo "building pyspark's wheel once, into $wheels" >&2
            "$VENV/bin/python" -m pip wheel --quiet --no-deps --wheel-dir "$wheels" "$pyspark_wanted" >&2 ||
                echo "note: pyspark's wheel could not be kept in $wheels; it is built for this environment" >&2
        fi
        wheel="$(ls "$wheels"/pyspark-*.whl 2>/dev/null | sort -V | tail -1 || true)"
        if [ -n "$wheel" ]; then "${install[@]}" "$wheel" >&2; fi
    fi
    "${install[@]}" -e ".[${pip_extras}]" >&2
    if [[ ",${TXMQ_EXTRAS}," == *,remoting,* ]]; then
        "${install[@]}" --no-deps --upgrade --target "$VENV/txmq-cpp-client" rocketmq-client-python==0.5.0rc2 >&2
    fi
    touch "$stamp"
fi
export PATH="$VENV/bin:$PATH"
export PYSPARK_PYTHON="$VENV/bin/python"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
