// The package as a user gets it: `npm pack` on a tree that was never built
// (prepare builds it), installed into an empty app, imported through ESM,
// CommonJS, and tsc --strict with NodeNext and bundler resolution.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const TSC = join(PACKAGE, "node_modules", "typescript", "bin", "tsc");

function run(cmd: string, args: string[], cwd: string): string {
  return execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

test("npm pack from a clean tree, installed into an empty app: ESM, CommonJS, tsc --strict", { timeout: 300_000 }, () => {
  const tmp = mkdtempSync(join(tmpdir(), "rl-pack-"));
  try {
    // A clean clone's tree: sources and configuration, nothing built.
    const tree = join(tmp, "tree");
    cpSync(PACKAGE, tree, { recursive: true, filter: (src) => !/[/\\](node_modules|dist|build)$/.test(src) });
    symlinkSync(join(PACKAGE, "node_modules"), join(tree, "node_modules"));
    const packed = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", tmp], tree)) as [{ filename: string; files: { path: string }[] }];
    const files = packed[0].files.map((f) => f.path);
    for (const f of ["dist/esm/index.js", "dist/esm/index.d.ts", "dist/cjs/index.js", "dist/cjs/package.json", "dist/esm/upstash.js", "src/index.ts", "README.md"]) {
      assert.ok(files.includes(f), `${f} in the tarball`);
    }
    // Every map points at a file that is shipped.
    assert.ok(files.filter((f) => f.endsWith(".d.ts.map")).length > 0);

    const app = join(tmp, "app");
    mkdirSync(app);
    run("npm", ["init", "-y"], app);
    run("npm", ["install", "--offline", "--no-audit", "--no-fund", join(tmp, packed[0].filename)], app);
    assert.ok(readdirSync(join(app, "node_modules", "redis-ratelimit", "dist")).includes("cjs"));
    writeFileSync(join(app, "esm.mjs"), 'import { RateLimiter } from "redis-ratelimit"; import { Ratelimit } from "redis-ratelimit/upstash"; console.log(typeof RateLimiter, typeof Ratelimit);\n');
    assert.equal(run("node", ["esm.mjs"], app).trim(), "function function");
    writeFileSync(join(app, "cjs.cjs"), 'const { RateLimiter } = require("redis-ratelimit"); const { RedisRateLimitStore } = require("redis-ratelimit/express"); console.log(typeof RateLimiter, typeof RedisRateLimitStore);\n');
    assert.equal(run("node", ["cjs.cjs"], app).trim(), "function function");
    writeFileSync(
      join(app, "check.ts"),
      'import { RateLimiter, type Decision } from "redis-ratelimit";\nimport { Ratelimit } from "redis-ratelimit/upstash";\n' +
        "export async function f(l: RateLimiter): Promise<Decision> { return l.gcra(\"k\", { limit: 1, period: \"1.5s\" }, { timeout: 100 }); }\n" +
        'export const a = Ratelimit.slidingWindow(10, "1.5 s");\n',
    );
    for (const [module, resolution] of [["nodenext", "nodenext"], ["esnext", "bundler"]] as const) {
      // skipLibCheck off: the shipped declarations are checked too (express-rate-limit is an optional peer).
      run("node", [TSC, "--strict", "--noEmit", "--module", module, "--moduleResolution", resolution, "--target", "es2022", "--types", "node", "--typeRoots", join(PACKAGE, "node_modules", "@types"), "check.ts"], app);
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
