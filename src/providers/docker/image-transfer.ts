import type Docker from 'dockerode';
import { statusCodeOf } from './lifecycle.ts';

/** Whether the engine holds the image (by name or id). @throws the engine's error other than 404. */
export async function hasImage(docker: Docker, reference: string): Promise<boolean> {
  try {
    await docker.getImage(reference).inspect();
    return true;
  } catch (error) {
    if (statusCodeOf(error) === 404) return false;
    throw error;
  }
}

/**
 * Copies an image from one engine to another through their APIs: `docker
 * save` on `from` streamed straight into `docker load` on `to` (layers `to`
 * holds already are kept as they are). Safe to repeat; an image `to` holds
 * under that name already is replaced by `from`'s.
 * @throws Error saying why (the image not on `from`, an engine out of reach, a load the engine refused).
 */
export async function transferImage(from: Docker, to: Docker, reference: string): Promise<void> {
  const saved = (await from.getImage(reference).get()) as NodeJS.ReadableStream & { destroy?(error?: Error): void };
  let loading: NodeJS.ReadableStream;
  try {
    loading = (await to.loadImage(saved, { quiet: true })) as NodeJS.ReadableStream;
  } catch (error) {
    saved.destroy?.();
    throw error;
  }
  const said = await new Promise<Array<{ error?: string; errorDetail?: { message?: string } }>>((resolve, reject) => {
    saved.on('error', reject);
    to.modem.followProgress(loading, (error: Error | null, output: Array<{ error?: string }>) => (error ? reject(error) : resolve(output)));
  });
  const refused = said.find((line) => line.error !== undefined || line.errorDetail !== undefined);
  if (refused !== undefined) throw new Error(`the engine did not load ${reference}: ${refused.errorDetail?.message ?? refused.error}`);
  if (!(await hasImage(to, reference))) throw new Error(`the engine did not load ${reference}: it is not there after the load`);
}
