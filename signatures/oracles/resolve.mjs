// Module resolution hook (see register.mjs): a bare specifier imported by one of the suite's
// own files is resolved as if imported from the package cache.
let parent;
let suite;

export function initialize(data) {
  parent = data.parent;
  suite = data.suite;
}

const bare = (s) => !s.startsWith('.') && !s.startsWith('/') && !s.includes(':');

export function resolve(specifier, context, next) {
  if (bare(specifier) && context.parentURL?.startsWith(suite)) {
    return next(specifier, { ...context, parentURL: parent });
  }
  return next(specifier, context);
}
