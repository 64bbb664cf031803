#!/usr/bin/env bash
# The NPU check: the first thing to run on an Ascend 910B/910C with CANN 8.x and torch_npu.
# Nothing in the Ascend C target had been compiled with CANN before this; this script is its first
# real run. Steps (each logged under $OUT, default ./npu_check_out):
#   1 doctor     what is installed (CANN, msopgen, bisheng, mssanitizer, msprof, torch_npu, SoC)
#   2 lint       the static checks on the three reference operators (no toolchain)
#   3 npu-tests  pytest -m npu tests/targets_ascendc/test_npu.py (builds on every path, runs, times)
#   4 eval       one operator end to end through the real harness (sage eval: build, correctness,
#                timing with the batched protocol), then the same with the cold-l2 protocol
#   5 run        the agent loop on that operator with a scripted model (sage run, 2 rounds)
#   6 calibrate  the task references on the NPU through the harness's comparator
#   7 report     npu_check_report.txt: send it back
# Without an NPU but with CANN, the CPU-twin path runs instead (steps 3-4 on --device cpu-twin).
#   bash scripts/npu_check.sh [TASK]      # TASK defaults to abs (the kernel-only reference)
# Exit status: 0 all passed, 1 a step failed, 2 no CANN (nothing was checked).
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
TASK="${1:-abs}"
OUT="${OUT:-$PWD/npu_check_out}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
SAGE=("$PY" -c 'import sys; from sagekernel.cli import main; sys.argv[0] = "sage"; main()')
rm -f "$OUT"/*.log "$OUT"/*.rc
if [ -z "${ASCEND_HOME_PATH:-}" ] && [ -f /usr/local/Ascend/ascend-toolkit/set_env.sh ]; then
  # shellcheck disable=SC1091
  source /usr/local/Ascend/ascend-toolkit/set_env.sh
fi
step() {  # step NAME TIMEOUT COMMAND...: run, log, record the exit status
  local name="$1" limit="$2"; shift 2
  echo "== $name: $*"
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "$rc" >"$OUT/$name.rc"
  tail -n 5 "$OUT/$name.log"
  [ "$rc" = 0 ] || FAILED=1
}
FAILED=0
step 1-doctor 300 "$PY" -m sagekernel.targets.ascendc.npucheck doctor
if ! grep -q "^ok  CANN toolkit" "$OUT/1-doctor.log"; then
  echo "npu_check: no CANN toolkit here (see $OUT/1-doctor.log); nothing was checked" >&2
  exit 2
fi
DEVICE=npu
grep -q "^ok  device npu" "$OUT/1-doctor.log" || DEVICE=cpu-twin
echo "== device: $DEVICE"
REF="src/sagekernel/targets/ascendc/reference"
for t in abs mul_sigmoid softmax; do
  tmpl=kernel-only; [ "$t" = softmax ] && tmpl=full
  step "2-lint-$t" 120 env SAGE_ASCENDC_TEMPLATE=$tmpl "${SAGE[@]}" lint "$t" "$REF/$t" --target ascendc --json
done
TEMPLATE=kernel-only; [ "$TASK" = softmax ] && TEMPLATE=full
export SAGE_ASCENDC_TEMPLATE=$TEMPLATE
if [ "$DEVICE" = npu ]; then
  step 3-npu-tests 3000 "$PY" -m pytest -m npu -v tests/targets_ascendc/test_npu.py
else
  step 3-npu-tests 3000 "$PY" -m pytest -m npu -v -k cpu_twin tests/targets_ascendc/test_npu.py
fi
mapfile -t FILES < <(find "$REF/$TASK" -name '*.cpp' -o -name '*.h' | sort)
step 4-eval-batched 3000 "${SAGE[@]}" eval "$TASK" "${FILES[@]}" --target ascendc --device "$DEVICE" --json
if [ "$DEVICE" = npu ]; then
  step 4-eval-cold-l2 3000 env SAGE_ASCENDC_TIMING=cold-l2 "${SAGE[@]}" eval "$TASK" "${FILES[@]}" --target ascendc --device npu --json
  SUITE="$OUT/suite"; mkdir -p "$SUITE"; cp "src/sagekernel/tasks/suite/"*/"$TASK.py" "$SUITE/"
  "$PY" -m sagekernel.targets.ascendc.npucheck script "$TASK" "$OUT/scripted.json"
  step 5-run 3000 "${SAGE[@]}" run --suite "$SUITE" --target ascendc --device npu \
    --model "scripted:$OUT/scripted.json" --workspace "$OUT/ws" --budget 2 --new
  step 6-calibrate 1800 "$PY" -m sagekernel.targets.ascendc.calibrate abs mul_sigmoid softmax exp gelu --device npu
fi
"$PY" -m sagekernel.targets.ascendc.npucheck report "$OUT" | tee "$OUT/npu_check_report.txt"
echo "npu_check: report in $OUT/npu_check_report.txt"
exit "$FAILED"
