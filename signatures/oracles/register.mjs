// Loaded with `node --import`: bare imports of the suite's files resolve in the package cache
// named by ORACLE_MODULES (a node_modules directory outside the checkout, filled by `npm ci`
// from this directory's lock file), so the checkout holds no node_modules of its own.
import { register } from 'node:module';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const modules = process.env.ORACLE_MODULES;
if (!modules) {
  throw new Error('ORACLE_MODULES is not set: run scripts/oracles, which installs the SDKs and sets it');
}
register('./resolve.mjs', import.meta.url, {
  data: {
    // A file URL inside the cache's root: resolving from it finds the cache's node_modules.
    parent: pathToFileURL(path.join(path.resolve(modules), '..', 'package.json')).href,
    suite: new URL('.', import.meta.url).href,
  },
});
