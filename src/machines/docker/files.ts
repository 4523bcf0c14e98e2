import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { FileEntry, FileRead, MachineFiles } from '../provider.ts';
import { execIn, execStream } from './exec.ts';

/**
 * A path's kind, then, for a file, its size and bytes; for a directory, one
 * line per entry (`type|size|modified|name`, as stat prints them). `N`: no
 * such path; `O`: something that is neither (a device, a socket).
 */
const READ_SCRIPT = `
p=$1
if [ -d "$p" ]; then
  echo D
  cd "$p" || exit 0
  for f in * .[!.]* ..?*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    stat -c '%F|%s|%Y|%n' -- "$f"
  done
elif [ -f "$p" ]; then
  printf 'F %s\\n' "$(stat -L -c %s -- "$p")"
  exec cat -- "$p"
elif [ -e "$p" ] || [ -L "$p" ]; then
  echo O
else
  echo N
fi
`;

/** Writes stdin to the path, creating its parent directories; exit 3 with the reason when it cannot. */
const WRITE_SCRIPT = `
p=$1
parent=$(dirname -- "$p")
mkdir -p -- "$parent" 2>/dev/null || { echo "cannot create the directory $parent" >&2; exit 3; }
[ -d "$p" ] && { echo "$p is a directory" >&2; exit 3; }
if [ "$2" = append ]; then cat >> "$p" || exit 3; else cat > "$p" || exit 3; fi
`;

/** Exit 0 removed, 3 missing, 4 a directory and not recursive. */
const REMOVE_SCRIPT = `
p=$1
[ -e "$p" ] || [ -L "$p" ] || exit 3
if [ -d "$p" ] && [ ! -L "$p" ]; then
  [ "$2" = recursive ] || exit 4
  rm -rf -- "$p"
else
  rm -f -- "$p"
fi
`;

const TYPES: Record<string, FileEntry['type']> = { directory: 'directory', 'symbolic link': 'symlink', 'regular file': 'file', 'regular empty file': 'file' };

function entryOf(line: string): FileEntry | null {
  const [kind, size, modified, ...name] = line.split('|');
  const type = TYPES[kind!];
  if (type === undefined) return null;
  return { name: name.join('|'), type, size: Number(size), modifiedAt: Number(modified) * 1000 };
}

/** The first line of a stream, and the stream from right after it. */
async function firstLine(stream: Readable): Promise<{ line: string; rest: Readable }> {
  const chunks: Buffer[] = [];
  for (;;) {
    const chunk = (stream.read() as Buffer | null) ?? (await nextChunk(stream));
    if (chunk === null) return { line: Buffer.concat(chunks).toString('utf8'), rest: stream };
    const newline = chunk.indexOf(10);
    if (newline < 0) {
      chunks.push(chunk);
      continue;
    }
    chunks.push(chunk.subarray(0, newline));
    if (newline + 1 < chunk.length) stream.unshift(chunk.subarray(newline + 1));
    return { line: Buffer.concat(chunks).toString('utf8'), rest: stream };
  }
}

function nextChunk(stream: Readable): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const done = () => {
      stream.off('readable', readable);
      stream.off('end', ended);
      stream.off('error', failed);
    };
    const readable = () => {
      const chunk = stream.read() as Buffer | null;
      if (chunk === null) return;
      done();
      resolve(chunk);
    };
    const ended = () => {
      done();
      resolve(null);
    };
    const failed = (error: Error) => {
      done();
      reject(error);
    };
    stream.on('readable', readable);
    stream.once('end', ended);
    stream.once('error', failed);
  });
}

/** A machine's files through the engine's exec: any image with a POSIX shell, stat and cat. */
export function dockerFiles(containerOf: (machineId: string) => Docker.Container): MachineFiles {
  return {
    async read(machine, path): Promise<FileRead> {
      const output = await execStream(containerOf(machine.id), ['/bin/sh', '-c', READ_SCRIPT, 'mp-read', path]);
      const { line, rest } = await firstLine(output);
      if (line.startsWith('F ')) return { type: 'file', size: Number(line.slice(2)), content: rest };
      rest.destroy();
      if (line === 'N' || line === '') return null;
      if (line === 'O') return { type: 'other' };
      return { type: 'directory' };
    },

    async list(machine, path) {
      const { stdout } = await execIn(containerOf(machine.id), ['/bin/sh', '-c', READ_SCRIPT, 'mp-list', path]);
      const [kind, ...lines] = stdout.toString('utf8').split('\n');
      if (kind !== 'D') return null;
      return lines.map(entryOf).filter((entry): entry is FileEntry => entry !== null);
    },

    async write(machine, path, content, append) {
      const { stderr, exitCode } = await execIn(containerOf(machine.id), ['/bin/sh', '-c', WRITE_SCRIPT, 'mp-write', path, append ? 'append' : 'replace'], { stdin: content, exitCode: true });
      return exitCode === 0 ? null : stderr.toString('utf8').trim() || 'the file could not be written';
    },

    async remove(machine, path, recursive) {
      const { exitCode } = await execIn(containerOf(machine.id), ['/bin/sh', '-c', REMOVE_SCRIPT, 'mp-remove', path, recursive ? 'recursive' : 'one'], { exitCode: true });
      return exitCode === 0 ? 'removed' : exitCode === 3 ? 'missing' : 'directory';
    },
  };
}
