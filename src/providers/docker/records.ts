import type Docker from 'dockerode';
import { extract } from 'tar-stream';
import { statusCodeOf } from './lifecycle.ts';
import { commandResultOf, type AgentRunResult } from '../agent/agent-client.ts';
import { RECORDS_DIR } from './container-spec.ts';

/** The files of a directory of a container, read through the engine's archive (the container need not run). */
async function readDirectory(docker: Docker, containerName: string, path: string): Promise<Map<string, Buffer> | null> {
  let archive: NodeJS.ReadableStream;
  try {
    archive = await docker.getContainer(containerName).getArchive({ path });
  } catch (error) {
    if (statusCodeOf(error) === 404) return null;
    throw error;
  }
  const files = new Map<string, Buffer>();
  const reader = extract();
  reader.on('entry', (header, stream, next) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: unknown) => void chunks.push(chunk as Buffer));
    stream.on('end', () => {
      if (header.type === 'file') files.set(header.name.split('/').pop()!, Buffer.concat(chunks));
      next();
    });
    stream.resume();
  });
  await new Promise<void>((resolve, reject) => {
    reader.on('finish', resolve);
    reader.on('error', reject);
    archive.pipe(reader);
  });
  return files;
}

/** The picture of the screen a run's record keeps (taken as it ended); null when there is none. */
export async function readRunScreenshot(docker: Docker, containerName: string, runId: string): Promise<Buffer | null> {
  const files = await readDirectory(docker, containerName, `${RECORDS_DIR}/runs/${runId}/screen.png`);
  const png = files?.get('screen.png');
  return png === undefined || png.length === 0 ? null : png;
}

/**
 * A run's record on a machine that is not running (it stopped under the run):
 * its outcome if the run ended before the stop, else null (the machine cannot
 * say). Read from the container's disk, as the agent wrote it (agent/API.md).
 */
export async function readRunRecord(docker: Docker, containerName: string, runId: string): Promise<AgentRunResult> {
  const files = await readDirectory(docker, containerName, `${RECORDS_DIR}/runs/${runId}`);
  const exit = files?.get('exit')?.toString('latin1').trim();
  if (files === null || exit === undefined || exit === '') return null;
  const part = (name: string) => files.get(name) ?? Buffer.alloc(0);
  const [stdoutBytes, stderrBytes, outputBytes] = (files.get('sizes')?.toString('latin1').trim().split(' ') ?? []).map(Number);
  return commandResultOf({
    status: exit === 'timeout' ? 'timeout' : 'exited',
    exitCode: exit === 'timeout' ? null : Number(exit),
    stdout: part('stdout'),
    stderr: part('stderr'),
    output: part('output'),
    stdoutBytes: stdoutBytes ?? part('stdout').length,
    stderrBytes: stderrBytes ?? part('stderr').length,
    outputBytes: outputBytes ?? part('output').length,
  });
}
