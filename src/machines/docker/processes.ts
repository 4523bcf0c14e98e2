import { StringDecoder } from 'node:string_decoder';
import type Docker from 'dockerode';
import type { MachineProcesses, ProcessEndReason, ProcessInfo, ProcessOutput } from '../provider.ts';
import { execIn } from './exec.ts';
import { RECORDS_DIR } from './run-script.ts';

/** At most this much output per read; the next read goes on from its offset. */
export const OUTPUT_READ_LIMIT = 1024 * 1024;

/**
 * Background processes, each recorded in the machine under its id
 * (`procs/<id>`): its command, start, pid, stdout and stderr (whole, on the
 * machine's disk), `order` (a line `O <bytes>` or `E <bytes>` each time a
 * stream grew, so their interleaving is known) and, once it ends, `exit`. A
 * supervisor shell, in a session of its own, feeds the streams from FIFOs and
 * holds the process's stdin FIFO open for input. `state` tells a record's
 * state: running, exited (with its code), stopped (the machine stopped or
 * restarted under it: its boot is not this one) or lost (its supervisor died).
 */
const COMMON = `
set -u
base=${RECORDS_DIR}/procs
boot=$(cut -d' ' -f22 /proc/1/stat 2>/dev/null || echo 0)
state() {
  d=$base/$1
  if [ -f "$d/exit" ]; then echo "exited $(cat "$d/exit")"; return; fi
  if [ "$(cat "$d/boot" 2>/dev/null)" != "$boot" ]; then echo "stopped -"; return; fi
  if kill -0 "$(cat "$d/supervisor" 2>/dev/null || echo x)" 2>/dev/null; then echo "running -"; else echo "lost -"; fi
}
`;

/** $1 id, $2 cwd, $3 command, $4 started (epoch ms): starts it and prints its pid. */
const START_SCRIPT = `${COMMON}
dir=$base/$1
mkdir -p "$base" && mkdir "$dir" || exit 3
printf '%s' "$3" > "$dir/command"
echo "$4" > "$dir/started"
echo "$boot" > "$dir/boot"
: > "$dir/stdout"; : > "$dir/stderr"; : > "$dir/order"
mkfifo "$dir/in" "$dir/out" "$dir/err" || exit 3
pump() {
  exec 4< "$1"
  last=0
  while :; do
    dd bs=65536 count=1 <&4 >> "$2" 2>/dev/null
    size=$(wc -c < "$2")
    [ "$size" -eq "$last" ] && break
    echo "$3 $size" >> "$dir/order"
    last=$size
  done
}
supervise() {
  exec 3<> "$dir/in"
  pump "$dir/out" "$dir/stdout" O & p1=$!
  pump "$dir/err" "$dir/stderr" E & p2=$!
  session=; command -v setsid >/dev/null 2>&1 && session=setsid
  $session /bin/sh -c 'echo 500 > /proc/self/oom_score_adj 2>/dev/null; cd "$1" && exec /bin/sh -c "$2"' sh "$2" "$3" <&3 > "$dir/out" 2> "$dir/err" &
  pid=$!
  echo "$pid" > "$dir/pid.new" && mv "$dir/pid.new" "$dir/pid"
  wait "$pid"; code=$?
  wait "$p1" "$p2"
  echo "$code" > "$dir/exit.new" && mv "$dir/exit.new" "$dir/exit"
  rm -f "$dir/out" "$dir/err"
}
# The supervisor outlives this exec (and the service): the machine's init adopts it.
( trap '' HUP; supervise "$@" ) </dev/null >/dev/null 2>&1 &
echo $! > "$dir/supervisor"
while [ ! -f "$dir/pid" ]; do sleep 0.01; done
cat "$dir/pid"
`;

/** Every record: a line `P <id> <pid> <state> <exit|-> <started> <command bytes>`, then the command. */
const LIST_SCRIPT = `${COMMON}
[ -d "$base" ] || exit 0
for dir in "$base"/proc_*; do
  [ -f "$dir/supervisor" ] || continue
  id=\${dir##*/}
  printf 'P %s %s %s %s %s\\n' "$id" "$(cat "$dir/pid")" "$(state "$id")" "$(cat "$dir/started")" "$(wc -c < "$dir/command")"
  cat "$dir/command"
done
`;

/**
 * $1 id, $2 offset, $3 wait (ms), $4 limit: waits (up to $3) for output past
 * the offset or the end, then prints `O <state> <exit|-> <stdout bytes>
 * <stderr bytes> <next offset>` and those bytes. `order` maps the combined
 * offset to a place in each stream; a read stops after the record that
 * reaches the limit.
 */
const OUTPUT_SCRIPT = `${COMMON}
dir=$base/$1
[ -f "$dir/supervisor" ] || exit 3
total() { awk '{ size[$1] = $2 } END { print size["O"] + size["E"] }' "$dir/order"; }
waited=0
while [ "$(total)" -le "$2" ] && [ "$waited" -lt "$3" ]; do
  case $(state "$1") in running*) ;; *) break ;; esac
  sleep 0.1; waited=$((waited + 100))
done
window=$(awk -v n="$2" -v limit="$4" '
  { tag = $1; size = $2 + 0; len = size - (tag == "O" ? po : pe)
    if (!started) {
      if (pos + len <= n) { pos += len; if (tag == "O") po = size; else pe = size; next }
      started = 1; so = po; se = pe; cut = n - pos
      if (tag == "O") so += cut; else se += cut
      taken = len - cut
    } else {
      if (taken >= limit) exit
      taken += len
    }
    pos += len; if (tag == "O") po = size; else pe = size }
  END { if (!started) { so = po; se = pe } print so + 0, po + 0, se + 0, pe + 0, po + pe }' "$dir/order")
set -- $window
printf 'O %s %s %s %s\\n' "$(state "\${dir##*/}")" "$(($2 - $1))" "$(($4 - $3))" "$5"
tail -c +$(($1 + 1)) "$dir/stdout" | head -c $(($2 - $1))
tail -c +$(($3 + 1)) "$dir/stderr" | head -c $(($4 - $3))
`;

/** $1 id; stdin to the process. Exit 3: unknown or not running. */
const INPUT_SCRIPT = `${COMMON}
dir=$base/$1
[ -f "$dir/supervisor" ] || exit 3
case $(state "$1") in running*) ;; *) exit 3 ;; esac
cat > "$dir/in"
`;

/** $1 id, $2 signal: to the process and all it started. Exit 3: unknown or not running. */
const SIGNAL_SCRIPT = `${COMMON}
dir=$base/$1
[ -f "$dir/supervisor" ] || exit 3
case $(state "$1") in running*) ;; *) exit 3 ;; esac
pid=$(cat "$dir/pid")
kill -s "$2" -- "-$pid" 2>/dev/null || kill -s "$2" "$pid"
`;

const text = (bytes: Buffer) => new StringDecoder('utf8').end(bytes).replaceAll('\u0000', '\uFFFD');

/** A record's state word (`state` in COMMON) as why it ended; null while it runs. */
function endReasonOf(state: string | undefined): ProcessEndReason | null {
  if (state === 'running') return null;
  if (state === 'exited') return 'exited';
  if (state === 'stopped') return 'machine-stopped';
  return 'lost';
}

function parseList(bytes: Buffer): ProcessInfo[] {
  const processes: ProcessInfo[] = [];
  let at = 0;
  while (at < bytes.length) {
    const newline = bytes.indexOf(10, at);
    const [, id, pid, state, exit, started, length] = bytes.subarray(at, newline).toString('latin1').split(' ');
    const command = bytes.subarray(newline + 1, newline + 1 + Number(length));
    at = newline + 1 + Number(length);
    processes.push({
      id: id!,
      command: text(command),
      pid: Number(pid),
      status: state === 'running' ? 'running' : 'exited',
      exitCode: state === 'exited' && exit !== '-' ? Number(exit) : null,
      endReason: endReasonOf(state),
      startedAt: Number(started),
    });
  }
  return processes.sort((a, b) => (a.id < b.id ? -1 : 1));
}

/** A machine's background processes through the engine's exec: any image with a POSIX shell, dd, awk and FIFOs. */
export function dockerProcesses(containerOf: (machineId: string) => Docker.Container): MachineProcesses {
  const script = (machineId: string, source: string, args: string[], stdin?: Buffer) =>
    execIn(containerOf(machineId), ['/bin/sh', '-c', source, 'mp-process', ...args], { exitCode: true, ...(stdin === undefined ? {} : { stdin }) });

  return {
    async start(machine, process) {
      const container = containerOf(machine.id);
      const { stdout, stderr, exitCode } = await execIn(
        container,
        ['/bin/sh', '-c', START_SCRIPT, 'mp-process', process.id, process.cwd ?? '/root', process.command, String(process.startedAt)],
        { env: process.env, exitCode: true },
      );
      if (exitCode !== 0) throw new Error(`the machine could not start the process: ${stderr.toString('utf8').trim() || `exit ${exitCode}`}`);
      return { id: process.id, command: process.command, pid: Number(stdout.toString('latin1').trim()), status: 'running', exitCode: null, endReason: null, startedAt: process.startedAt };
    },

    async list(machine) {
      return parseList((await script(machine.id, LIST_SCRIPT, [])).stdout);
    },

    async output(machine, id, offset, waitMs): Promise<ProcessOutput | null> {
      const { stdout, exitCode } = await script(machine.id, OUTPUT_SCRIPT, [id, String(offset), String(waitMs), String(OUTPUT_READ_LIMIT)]);
      if (exitCode === 3) return null;
      const newline = stdout.indexOf(10);
      const [, state, exit, outLength, errLength, next] = stdout.subarray(0, newline).toString('latin1').split(' ');
      const out = stdout.subarray(newline + 1, newline + 1 + Number(outLength));
      const err = stdout.subarray(newline + 1 + Number(outLength), newline + 1 + Number(outLength) + Number(errLength));
      return { stdout: text(out), stderr: text(err), offset: Number(next), running: state === 'running', exitCode: state === 'exited' && exit !== '-' ? Number(exit) : null, endReason: endReasonOf(state) };
    },

    async input(machine, id, data) {
      return (await script(machine.id, INPUT_SCRIPT, [id], data)).exitCode === 0;
    },

    async signal(machine, id, signal) {
      return (await script(machine.id, SIGNAL_SCRIPT, [id, signal])).exitCode === 0;
    },
  };
}
