import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

/** The documents a reader walks through: the README and every page of docs/. Paths are relative to the repository. */
export function documentPaths(root: string): string[] {
  const pages = readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')).sort();
  return ['README.md', ...pages.map((name) => `docs/${name}`)];
}

export interface CodeBlock {
  /** The document, relative to the repository. */
  page: string;
  /** The line of the opening fence, 1-based. */
  line: number;
  /** The fence's info string split in words: `sh docker` is ['sh', 'docker']. */
  info: string[];
  /** The block's text, its fence's indentation taken off. */
  code: string;
}

export interface Link {
  page: string;
  line: number;
  target: string;
}

export interface ParsedPage {
  blocks: CodeBlock[];
  links: Link[];
  /** The anchors of the page's headings, as GitHub makes them. */
  anchors: Set<string>;
}

const FENCE = /^(\s*)(`{3,}|~{3,})(.*)$/;
const HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;
const INLINE_CODE = /(`+)(?:(?!\1)[\s\S])*?\1/g;
const LINK = /\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g;

/** GitHub's heading anchor: lower case, punctuation dropped (letters, digits, `-`, `_` and spaces kept), each space a `-`. */
export function githubSlug(heading: string): string {
  const text = heading
    .replace(/`([^`]*)`/g, '$1')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '');
  return text.trim().toLowerCase().replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '').replace(/\s/g, '-');
}

/** Splits a Markdown page into its fenced code blocks, the links outside them, and its headings' anchors. */
export function parsePage(page: string, text: string): ParsedPage {
  const blocks: CodeBlock[] = [];
  const links: Link[] = [];
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const lines = text.split('\n');
  let open: { fence: string; indent: number; line: number; info: string[]; body: string[] } | undefined;
  lines.forEach((raw, index) => {
    const fence = FENCE.exec(raw);
    if (open) {
      if (fence && fence[2]!.startsWith(open.fence) && fence[3]!.trim() === '') {
        blocks.push({ page, line: open.line, info: open.info, code: open.body.join('\n') });
        open = undefined;
      } else {
        open.body.push(raw.slice(Math.min(open.indent, raw.length - raw.trimStart().length)));
      }
      return;
    }
    if (fence) {
      open = { fence: fence[2]!, indent: fence[1]!.length, line: index + 1, info: fence[3]!.trim().split(/\s+/).filter(Boolean), body: [] };
      return;
    }
    const heading = HEADING.exec(raw);
    if (heading) {
      const slug = githubSlug(heading[2]!);
      const count = seen.get(slug) ?? 0;
      seen.set(slug, count + 1);
      anchors.add(count === 0 ? slug : `${slug}-${count}`);
    }
    for (const match of raw.replace(INLINE_CODE, '').matchAll(LINK)) links.push({ page, line: index + 1, target: match[1]! });
  });
  if (open) throw new Error(`${page}:${open.line}: a code fence that is never closed`);
  return { blocks, links, anchors };
}

/** Every relative link of these pages that leads nowhere: a missing file, or an anchor no heading of its page has. */
export interface Files {
  read(path: string): string;
  exists(path: string): boolean;
}

/** The repository's own files, by paths relative to `root`. */
export const filesUnder = (root: string): Files => ({
  read: (path) => readFileSync(join(root, path), 'utf8'),
  exists: (path) => existsSync(join(root, path)),
});

export function brokenLinks(root: string, pages: readonly string[], files: Files = filesUnder(root)): string[] {
  const parsed = new Map<string, ParsedPage>();
  const parse = (path: string) => {
    let result = parsed.get(path);
    if (!result) parsed.set(path, (result = parsePage(path, files.read(path))));
    return result;
  };
  const broken: string[] = [];
  for (const page of pages) {
    for (const link of parse(page).links) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link.target)) continue; // https:, mailto: and the like: not ours to check
      const [pathPart = '', anchor] = link.target.split('#', 2) as [string, string | undefined];
      const target = pathPart === '' ? page : relative(root, join(root, dirname(page), decodeURI(pathPart)));
      const where = `${link.page}:${link.line}: ${link.target}`;
      if (target.startsWith('..') || !files.exists(target)) {
        broken.push(`${where} (no file ${target})`);
        continue;
      }
      if (anchor !== undefined && target.endsWith('.md') && !parse(target).anchors.has(decodeURIComponent(anchor))) {
        broken.push(`${where} (no heading #${anchor} in ${target})`);
      }
    }
  }
  return broken;
}
