import type Docker from 'dockerode';
import { extract } from 'tar-stream';
import { statusCodeOf } from './lifecycle.ts';
import { RECORDS_DIR, RUN_OUTPUT_LIMIT, parseRunAnswer, type RunRecord } from './run-script.ts';

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
  return files?.get('screen.png') ?? null;
}

/**
 * A run's record on a machine that is not running (it stopped under the run):
 * its outcome if the run ended before the stop, else null (the machine cannot
 * say). Read from the container's disk, the way the run script reports it.
 */
export async function readRunRecord(docker: Docker, containerName: string, runId: string): Promise<RunRecord | null> {
  const files = await readDirectory(docker, containerName, `${RECORDS_DIR}/runs/${runId}`);
  const exit = files?.get('exit')?.toString('latin1').trim();
  if (files === null || exit === undefined) return null;
  const part = (name: string) => files.get(name) ?? Buffer.alloc(0);
  const [stdout, stderr, output] = [part('stdout'), part('stderr'), part('output')];
  const header = `machine-platform-run 1 ${exit} ${stdout.length} ${stderr.length} ${output.length}\n`;
  return parseRunAnswer(Buffer.concat([Buffer.from(header, 'latin1'), stdout.subarray(0, RUN_OUTPUT_LIMIT), stderr.subarray(0, RUN_OUTPUT_LIMIT), output.subarray(0, RUN_OUTPUT_LIMIT)]));
}
