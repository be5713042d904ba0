# What the lab test scripts share (sourced, not run): a scratch folder removed on exit, a
# failure count, running a command with its output kept, the usual checks, and the summary.
# set -u is on in the scripts that source this.

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run NAME EXPECTED_RC CMD...: runs CMD with stdout/stderr in $tmp/NAME.{out,err}.
run() {
  local name=$1 want=$2
  shift 2
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "$name: exit $rc, expected $want ($*)"
    sed 's/^/  | /' "$tmp/$name.err" | tail -5
  fi
}

# expect_one_line_error NAME PATTERN CMD...: exit 2, one line on stderr matching PATTERN.
expect_one_line_error() {
  local name=$1 pattern=$2
  shift 2
  run "$name" 2 "$@"
  [ "$(wc -l <"$tmp/$name.err")" -eq 1 ] || fail "$name: stderr is not one line: $(cat "$tmp/$name.err")"
  grep -Eq -- "$pattern" "$tmp/$name.err" || fail "$name: stderr '$(cat "$tmp/$name.err")' lacks /$pattern/"
}

# check_best NAME FILE HEADER ROWS: header, rows, every best-so-far cell in [0, 1] and non-decreasing.
check_best() {
  local name=$1 file=$2 header=$3 rows=$4
  [ -f "$file" ] || { fail "$name: no $file"; return; }
  [ "$(head -n 1 "$file")" = "$header" ] || fail "$name: header '$(head -n 1 "$file")', expected '$header'"
  [ "$(($(wc -l <"$file") - 1))" -eq "$rows" ] || fail "$name: not $rows data rows"
  awk -F, 'NR > 1 { for (i = 2; i <= NF; ++i) { v = $i + 0
      if ($i !~ /^[0-9.]+$/ || v < 0 || v > 1) { print "bad accuracy " $i; bad = 1 }
      if (NR > 2 && v < prev[i]) { print "best so far decreases in column " i; bad = 1 }
      prev[i] = v } } END { exit bad }' "$file" || fail "$name: best-so-far columns wrong"
}

# check_png FILE: a PNG when gnuplot is installed (nothing to check without it).
check_png() {
  if command -v gnuplot >/dev/null 2>&1; then
    [ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = "211PNG" ] || fail "$1 is not a PNG"
  fi
}

# finish LABEL: the summary line and the exit status.
finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
  fi
  echo "$1: all checks passed"
}
