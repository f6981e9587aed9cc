#!/usr/bin/env bash
# Open the HTML reports in headless Chromium and check that every chart is drawn.
#
# Writes `elevator run SCENARIO --report` and `elevator reproduce --only SCENARIO --report`
# pages, renders each with `chromium --headless --dump-dom` and `--screenshot`, and fails
# unless every <svg class="chart"> of the rendered DOM has drawn marks (a polyline with
# points, a bar with a height) and the screenshot is a PNG with ink on it.
# Installs the Debian `chromium` package with apt-get when it is missing. Where it cannot be
# installed the check fails, unless ELEVATOR_SKIP_BROWSER=1 says to skip it (CI sets none).
#
# Usage: scripts/check-report.sh [OUT_DIR]   (default target/check-report)
# ELEVATOR=path/to/elevator uses that binary instead of building one.
# SCREENSHOT=docs/report.png also keeps the run page's screenshot there.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${1:-target/check-report}
SCENARIO=morton-2-streaming-write-vs-interactivity

find_chromium() {
    command -v chromium || command -v chromium-browser || true
}

CHROMIUM=$(find_chromium)
if [ -z "$CHROMIUM" ]; then
    echo "check-report: chromium missing; installing the Debian package" >&2
    SUDO=
    if [ "$(id -u)" != 0 ]; then
        SUDO="sudo -n"
    fi
    if command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        $SUDO apt-get install -y --no-install-recommends chromium >&2 ||
            { $SUDO apt-get update >&2 &&
                $SUDO apt-get install -y --no-install-recommends chromium >&2; } || true
    fi
    CHROMIUM=$(find_chromium)
fi
if [ -z "$CHROMIUM" ]; then
    if [ "${ELEVATOR_SKIP_BROWSER:-}" = 1 ]; then
        echo "check-report: SKIPPED (ELEVATOR_SKIP_BROWSER=1): chromium is not installed;" \
            "the HTML was not opened in a browser" >&2
        exit 0
    fi
    echo "check-report: chromium is not installed and cannot be installed here (no apt-get," \
        "no root, or no package mirror); set ELEVATOR_SKIP_BROWSER=1 to skip this check" >&2
    exit 1
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "check-report: python3 is needed to read the DOM and the PNG" >&2
    exit 1
fi

if [ -z "${ELEVATOR:-}" ]; then
    cargo build --profile ci -p elevator-cli --quiet
    ELEVATOR=${CARGO_TARGET_DIR:-target}/ci/elevator
fi

rm -rf "$OUT"
mkdir -p "$OUT"
"$ELEVATOR" run "$SCENARIO" --report "$OUT/run" >/dev/null
"$ELEVATOR" reproduce --only "$SCENARIO" --report "$OUT/reproduce" >/dev/null

status=0
for page in "$OUT/run/index.html" "$OUT/reproduce/reproduce.html" \
    "$OUT/reproduce/$SCENARIO.html"; do
    url="file://$(realpath "$page")"
    base="${page%.html}"
    # A fresh profile per page: no state from another run, no first-run dialogs.
    profile=$(mktemp -d)
    flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run
        --user-data-dir="$profile" --window-size=1100,1300)
    timeout 60 "$CHROMIUM" "${flags[@]}" --dump-dom "$url" >"$base.dom.html" 2>"$base.log"
    timeout 60 "$CHROMIUM" "${flags[@]}" --screenshot="$base.png" "$url" >>"$base.log" 2>&1
    rm -rf "$profile"
    if ! python3 scripts/check-report.py "$page" "$base.dom.html" "$base.png"; then
        status=1
    fi
done

# The check can fail: a chart without marks and a blank page must be refused.
broken="$OUT/broken.html"
printf '%s\n' '<!DOCTYPE html><html><body>' \
    '<svg class="chart" width="200" height="100"><text x="5" y="20">axes only</text></svg>' \
    '</body></html>' >"$broken"
profile=$(mktemp -d)
timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$profile" --window-size=400,300 --dump-dom "file://$(realpath "$broken")" \
    >"$OUT/broken.dom.html" 2>/dev/null
timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$profile" --window-size=400,300 --screenshot="$OUT/broken.png" \
    "file://$(realpath "$broken")" >/dev/null 2>&1
rm -rf "$profile"
if python3 scripts/check-report.py "$broken" "$OUT/broken.dom.html" "$OUT/broken.png" \
    2>"$OUT/broken.log"; then
    echo "check-report: the checker passed a chart without marks on a blank page" >&2
    status=1
elif [ "$(grep -c 'no drawn marks\|blank' "$OUT/broken.log")" -ne 2 ]; then
    echo "check-report: the checker refused the broken page for the wrong reasons:" >&2
    cat "$OUT/broken.log" >&2
    status=1
else
    echo "check-report: a chart without marks and a blank screenshot are refused"
fi

if [ -n "${SCREENSHOT:-}" ]; then
    cp "$OUT/run/index.png" "$SCREENSHOT"
    echo "check-report: kept $SCREENSHOT" >&2
fi
exit $status
