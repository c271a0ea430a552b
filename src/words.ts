/**
 * Words the panel shows: counts with their plural, a thing named without repeating its name
 * ("model `net`", but `model` alone), and the kernel's Markdown code spans (`name`) as text
 * and code parts, never raw backticks.
 */

/** `1 tensor`, `2 tensors`, `0 workers`; `plural` when the word does not just take an `s`. */
export function countOf(n: number, singular: string, plural?: string): string {
  return `${n} ${n === 1 ? singular : (plural ?? `${singular}s`)}`;
}

/** Lower case, `_` and `-` as spaces, trimmed: how two names are compared. */
function norm(text: string): string {
  return text
    .toLowerCase()
    .replace(/[\s_-]+/g, ' ')
    .trim();
}

/**
 * Whether `name` already says `what`: `model` is a model, `loss_fn` a loss, `opt` is not an
 * optimizer in words ("optimizer `opt`"). The last part of a dotted path counts
 * (`trainer.model`).
 */
export function namesItself(what: string, name: string): boolean {
  const last = norm(
    name
      .split(/[.[\]]/)
      .filter(Boolean)
      .pop() ?? name
  );
  const w = norm(what);
  return last === w || last.split(' ')[0] === w;
}

/** A piece of text: plain, or code (a user's name, shown in code style). */
export type TextPart = string | { code: string };

/** `['model ', {code: 'net'}]`, or just `[{code: 'model'}]` where the name says it. */
export function labelled(what: string, name: string): TextPart[] {
  return namesItself(what, name)
    ? [{ code: name }]
    : [`${what} `, { code: name }];
}

/** Split Markdown code spans: "Checkpoint `model.layers`" -> ['Checkpoint ', {code}]. */
export function codeSpans(text: string): TextPart[] {
  const parts: TextPart[] = [];
  const pieces = text.split('`');
  if (pieces.length % 2 === 0) {
    // an unpaired backtick: not Markdown, keep the text as it is
    return text ? [text] : [];
  }
  pieces.forEach((piece, i) => {
    if (!piece) {
      return;
    }
    parts.push(i % 2 ? { code: piece } : piece);
  });
  return parts;
}

/** The text without Markdown code marks: "Checkpoint `model.layers`" -> "Checkpoint model.layers". */
export function plainText(text: string): string {
  return codeSpans(text)
    .map(p => (typeof p === 'string' ? p : p.code))
    .join('');
}

/** Append `parts` to `el` as text nodes and `<code class=codeClass>` elements (never HTML). */
export function appendParts(
  el: HTMLElement,
  parts: ReadonlyArray<TextPart>,
  codeClass = 'vramscope-Code'
): HTMLElement {
  for (const part of parts) {
    if (typeof part === 'string') {
      el.append(part);
    } else {
      const code = document.createElement('code');
      code.className = codeClass;
      code.textContent = part.code;
      el.append(code);
    }
  }
  return el;
}
