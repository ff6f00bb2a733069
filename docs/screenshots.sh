#!/usr/bin/env bash
# Screenshots of the Dagster UI for docs/: the asset lineage and one asset's catalog page, taken
# with headless Chromium (Debian's `chromium` package) against `dagster-webserver` on a home that
# has run (e.g. `memorypack demo --home /tmp/demo`).
#   bash docs/screenshots.sh /tmp/demo
set -euo pipefail
home=${1:?usage: docs/screenshots.sh HOME}
port=${PORT:-3130}
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$here/.venv}
export MEMORYPACK_HOME=$home
cd "$here"
DAGSTER_HOME=$("$venv/bin/python" -m jobs.instance)  # memorypack's instance config, as `make ui`
export DAGSTER_HOME
"$venv/bin/dagster-webserver" -w workspace.yaml -h 127.0.0.1 -p "$port" >/tmp/memorypack-webserver.log 2>&1 &
server=$!
trap 'kill $server' EXIT
for _ in $(seq 120); do
  curl -sf "http://127.0.0.1:$port/server_info" >/dev/null && break
  sleep 1
done
shoot() {  # url, output file
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1800,1100 \
    --virtual-time-budget=30000 --screenshot="$2" "http://127.0.0.1:$port$1" 2>/dev/null
  echo "wrote $2"
}
shoot "/asset-groups" docs/lineage.png
shoot "/assets/memory_pack" docs/memory_pack.png
