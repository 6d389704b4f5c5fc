# Compares two golden outputs line by line, treating numbers as equal when
# they agree to a relative 1e-5 (plus 2e-6 absolute for values printed near
# zero). Why: the predictor's float32 network and glibc's libm pick
# CPU-specific code paths (AVX2/FMA) at run time, so the last printed digit
# may differ between machines; everything else must match exactly.
# usage: awk -f numeric_diff.awk GOLDEN ACTUAL   (exit 0 when equal)
function skeleton(line, numbers,    n, rest, out) {
  n = 0
  rest = line
  out = ""
  while (match(rest, /-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/)) {
    out = out substr(rest, 1, RSTART - 1) "#"
    numbers[++n] = substr(rest, RSTART, RLENGTH)
    rest = substr(rest, RSTART + RLENGTH)
  }
  out = out rest
  numbers[0] = n
  return out
}
function abs(x) { return x < 0 ? -x : x }
NR == FNR { golden[FNR] = $0; golden_lines = FNR; next }
{
  actual_lines = FNR
  if (FNR > golden_lines) { printf "line %d only in the new output: %s\n", FNR, $0; bad = 1; next }
  a = skeleton(golden[FNR], gn)
  b = skeleton($0, an)
  if (a != b) { printf "line %d differs in text:\n- %s\n+ %s\n", FNR, golden[FNR], $0; bad = 1; next }
  for (i = 1; i <= gn[0]; i++) {
    x = gn[i] + 0; y = an[i] + 0
    scale = abs(x) > abs(y) ? abs(x) : abs(y)
    if (abs(x - y) > 1e-5 * scale + 2e-6) {
      printf "line %d, number %d: %s became %s\n", FNR, i, gn[i], an[i]; bad = 1
    }
  }
}
END {
  if (actual_lines < golden_lines) { printf "the new output lacks lines %d-%d\n", actual_lines + 1, golden_lines; bad = 1 }
  exit bad
}
