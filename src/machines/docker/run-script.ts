import type { CommandResult } from '../provider.ts';
import { StringDecoder } from 'node:string_decoder';

/** CONTRACT 15: at most this much of a run's stdout, of its stderr and of its combined output is kept. */
export const RUN_OUTPUT_LIMIT = 1024 * 1024;

/** Where a machine keeps its records of runs and processes (on its disk: they outlive the service, not the machine's stop). */
export const RECORDS_DIR = '/var/lib/machine-platform';

/**
 * A run, executed in the machine by `/bin/sh` under its run id, as `sh -c
 * RUN_SCRIPT mp-run <id> <timeout seconds> <cwd> <command>`: any image with a
 * POSIX shell can do it. The first exec to create the run's record directory
 * runs the command, its stdout and stderr going to files of the record (and,
 * in the order they come, to a combined one); the exit code is written last.
 * Any later exec for the same id (its service process died, or let it go)
 * waits for that record instead: a command never runs twice. Either way the
 * answer is one header line, `machine-platform-run 1 <exit code | timeout |
 * unknown> <stdout bytes> <stderr bytes> <output bytes>`, then the first
 * RUN_OUTPUT_LIMIT bytes of each. `unknown`: the machine restarted, or the
 * executing shell died, before the outcome was written.
 *
 * The command runs in a session of its own (setsid, where the image has it),
 * so a timeout kills all it started, and first in line for the kernel's
 * out-of-memory killer (oom_score_adj 500), so a command that runs out of
 * memory is killed rather than the machine's init or its screen. Its output is kept whole on the machine's
 * disk; records older than two hours (the longest timeout is one) are removed as runs start.
 */
export const RUN_SCRIPT = `
set -u
base=${RECORDS_DIR}/runs
dir=$base/$1
limit=${RUN_OUTPUT_LIMIT}
read -r _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ boot _ < /proc/1/stat
report() {
  if command -v stat >/dev/null 2>&1; then set -- "$1" $(stat -c %s "$dir/stdout" "$dir/stderr" "$dir/output")
  else set -- "$1" "$(wc -c < "$dir/stdout")" "$(wc -c < "$dir/stderr")" "$(wc -c < "$dir/output")"; fi
  printf 'machine-platform-run 1 %s %s %s %s\\n' "$@"
  if [ "$2" -le "$limit" ] && [ "$3" -le "$limit" ] && [ "$4" -le "$limit" ]; then
    cat "$dir/stdout" "$dir/stderr" "$dir/output"
  else
    head -c "$limit" "$dir/stdout"; head -c "$limit" "$dir/stderr"; head -c "$limit" "$dir/output"
  fi
}
[ -d "$base" ] || mkdir -p "$base" || exit 97
if mkdir "$dir" 2>/dev/null; then
  echo "$$" > "$dir/owner"
  echo "$boot" > "$dir/boot"
  # Nothing in the background may hold this exec's output open: the engine waits for it before answering.
  ( find "$base" -mindepth 1 -maxdepth 1 -mmin +120 -exec rm -rf {} + ) < /dev/null > /dev/null 2>&1 &
  : > "$dir/stdout"; : > "$dir/stderr"; : > "$dir/output"
  mkfifo "$dir/out" "$dir/err" || exit 97
  tee -a "$dir/stdout" < "$dir/out" >> "$dir/output" 2> /dev/null & t1=$!
  tee -a "$dir/stderr" < "$dir/err" >> "$dir/output" 2> /dev/null & t2=$!
  session=; command -v setsid >/dev/null 2>&1 && session=setsid
  $session /bin/sh -c 'echo 500 > /proc/self/oom_score_adj 2>/dev/null; cd "$1" && exec /bin/sh -c "$2"' sh "$3" "$4" < /dev/null > "$dir/out" 2> "$dir/err" &
  pid=$!
  ( trap 'kill "$s" 2>/dev/null; exit 0' TERM
    sleep "$2" & s=$!; wait "$s"
    : > "$dir/timedout"; kill -KILL -"$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null ) < /dev/null > /dev/null 2>&1 &
  dog=$!
  wait "$pid"; code=$?
  kill "$dog" 2>/dev/null
  # What the command started in the background may hold its output open: a second for the rest of it, no more.
  ( trap 'kill "$s" 2>/dev/null; exit 0' TERM
    sleep 1 & s=$!; wait "$s"; kill "$t1" "$t2" 2>/dev/null ) < /dev/null > /dev/null 2>&1 &
  late=$!
  wait "$t1" "$t2"
  kill "$late" 2>/dev/null
  [ -f "$dir/timedout" ] && code=timeout
  # One short write: a waiter that sees it non-empty sees all of it.
  echo "$code" > "$dir/exit"
  # The screen as the run left it, for the run's record, where the machine has one (not waited for).
  if [ -e /tmp/.X11-unix/X1 ] && command -v scrot >/dev/null 2>&1; then
    ( DISPLAY=:1 scrot -o -z "$dir/screen.png" ) < /dev/null > /dev/null 2>&1 &
  fi
else
  while [ ! -s "$dir/exit" ]; do
    started=; read -r started < "$dir/boot" 2>/dev/null
    if [ -n "$started" ] && [ "$started" != "$boot" ]; then printf 'machine-platform-run 1 unknown 0 0 0\\n'; exit 0; fi
    owner=; read -r owner < "$dir/owner" 2>/dev/null
    if [ -n "$owner" ] && ! kill -0 "$owner" 2>/dev/null && [ ! -s "$dir/exit" ]; then printf 'machine-platform-run 1 unknown 0 0 0\\n'; exit 0; fi
    sleep 0.2
  done
  read -r code < "$dir/exit"
fi
report "$code"
`;

/** A run's outcome as the machine recorded it. */
export type RunRecord = CommandResult;

const HEADER = /^machine-platform-run 1 (\d+|timeout|unknown) (\d+) (\d+) (\d+)\n/;

/** Bytes as text: invalid UTF-8 and a character cut by the limit become U+FFFD; NUL too (PostgreSQL text refuses it). */
function text(bytes: Buffer): string {
  return new StringDecoder('utf8').end(bytes).replaceAll('\u0000', '\uFFFD');
}

/**
 * The script's answer, or null for `unknown`.
 * @throws Error when it is not the script's answer (the exec failed before it ran: no shell, no disk).
 */
export function parseRunAnswer(answer: Buffer): RunRecord | null {
  const newline = answer.indexOf(10);
  const header = HEADER.exec(answer.subarray(0, newline + 1).toString('latin1'));
  if (header === null) throw new Error(`the machine could not run the command: ${text(answer.subarray(0, 200)).trim() || 'no answer'}`);
  if (header[1] === 'unknown') return null;
  const sizes = [Number(header[2]), Number(header[3]), Number(header[4])];
  const kept = sizes.map((size) => Math.min(size, RUN_OUTPUT_LIMIT));
  let at = newline + 1;
  const [stdout, stderr, output] = kept.map((length) => {
    const part = answer.subarray(at, at + length);
    at += length;
    return text(part);
  });
  const timedOut = header[1] === 'timeout';
  return { exitCode: timedOut ? null : Number(header[1]), timedOut, stdout: stdout!, stderr: stderr!, output: output!, truncated: sizes.some((size) => size > RUN_OUTPUT_LIMIT) };
}
