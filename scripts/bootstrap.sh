# Sourced by scripts/dev and scripts/test: the pinned Python environment with the project installed.
# Needs only python3.11 and the package registries; uv caches downloads in ~/.cache/uv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export UV_PYTHON_DOWNLOADS=never  # use the machine's Python 3.11; never fetch one
if command -v uv >/dev/null 2>&1; then
  UV=(uv)
else
  python3.11 -m pip show uv >/dev/null 2>&1 || python3.11 -m pip install --quiet --disable-pip-version-check "uv==0.13.9"
  UV=(python3.11 -m uv)
fi
"${UV[@]}" sync --frozen --quiet --python 3.11
source .venv/bin/activate
