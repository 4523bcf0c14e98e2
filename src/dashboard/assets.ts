import { fileURLToPath } from 'node:url';

/** The dashboard's files, served from memory (src/http/static-assets.ts). */
export const PUBLIC_DIR = fileURLToPath(new URL('./public/', import.meta.url));
