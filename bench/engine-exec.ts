import type Docker from 'dockerode';

/**
 * The baseline of every in-machine figure: what a user does without us, one
 * engine-API exec (create, start, read its output, inspect for the exit code).
 */
export async function engineExec(container: Docker.Container, cmd: string[], stdin?: Buffer): Promise<{ stdout: Buffer; stderr: Buffer; exitCode: number | null }> {
  const exec = await container.exec({ Cmd: cmd, AttachStdin: stdin !== undefined, AttachStdout: true, AttachStderr: true, Tty: false, User: 'root' });
  const stream = await exec.start({ hijack: true, stdin: stdin !== undefined, Detach: false, Tty: false });
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  await new Promise<void>((resolve, reject) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', reject);
    if (stdin !== undefined) stream.end(stdin);
  });
  const { ExitCode } = await exec.inspect();
  const all = Buffer.concat(chunks);
  const parts: Record<number, Buffer[]> = { 1: [], 2: [] };
  // The engine's multiplexed stream: 8-byte headers (stream 1 stdout, 2 stderr; big-endian length at byte 4).
  for (let at = 0; at + 8 <= all.length; at += 8 + all.readUInt32BE(at + 4)) parts[all[at]!]?.push(all.subarray(at + 8, at + 8 + all.readUInt32BE(at + 4)));
  return { stdout: Buffer.concat(parts[1]!), stderr: Buffer.concat(parts[2]!), exitCode: ExitCode ?? null };
}
