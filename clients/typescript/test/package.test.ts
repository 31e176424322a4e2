import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { builtinModules } from 'node:module';

// The package has no runtime dependency: package.json declares none, and the
// built code imports only Node's own modules and its own files.

test('package.json declares no runtime dependency', () => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies', 'bundleDependencies', 'bundledDependencies']) {
    assert.ok(pkg[field] === undefined || Object.keys(pkg[field]).length === 0, `${field}: ${JSON.stringify(pkg[field])}`);
  }
  assert.equal(pkg.type, 'module');
  assert.ok(pkg.exports['.'].types.endsWith('.d.ts'));
  // Build tools are pinned to exact versions, and the lock file pins them too.
  for (const [name, version] of Object.entries(pkg.devDependencies as Record<string, string>)) {
    assert.match(version, /^\d+\.\d+\.\d+$/, `${name}@${version} is not pinned`);
  }
  const lock = JSON.parse(readFileSync(new URL('../../package-lock.json', import.meta.url), 'utf8'));
  assert.deepEqual(lock.packages[''].dependencies, undefined);
});

test('the built package imports only node: modules and its own files', () => {
  const dir = new URL('../src/', import.meta.url);
  const files = readdirSync(dir).filter((f) => f.endsWith('.js'));
  assert.ok(files.length >= 5, `only ${files}`);
  const specifier = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;
  for (const f of files) {
    const src = readFileSync(new URL(f, dir), 'utf8');
    for (const m of src.matchAll(specifier)) {
      const spec = m[1] ?? m[2];
      const ok = spec.startsWith('./') || (spec.startsWith('node:') && builtinModules.includes(spec.slice(5)));
      assert.ok(ok, `${f} imports ${spec}`);
    }
  }
});
