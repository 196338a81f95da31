// The package as a user gets it: the committed tree (`git archive HEAD`, what
// a clean clone holds: nothing built, no node_modules), `npm ci` from the
// lockfile, `npm pack` (prepare builds it), the tarball installed into an
// empty app, imported through ESM, CommonJS, and tsc --strict with NodeNext
// and bundler resolution. Installs prefer the npm cache (offline when warm).
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

function run(cmd: string, args: string[], cwd: string): string {
  return execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

const INSTALL = ["--prefer-offline", "--no-audit", "--no-fund"];

/** The package's directory inside its git checkout ("clients/node/"), or undefined outside one. */
function gitPrefix(): string | undefined {
  try {
    return run("git", ["rev-parse", "--show-prefix"], PACKAGE).trim();
  } catch {
    return undefined;
  }
}

const prefix = gitPrefix();

test("npm pack from a clean clone, installed into an empty app: ESM, CommonJS, tsc --strict", { timeout: 120_000, skip: prefix === undefined && "not in a git checkout" }, async () => {
  const tmp = mkdtempSync(join(tmpdir(), "rl-pack-"));
  try {
    // A clean clone's tree: the committed files only, nothing built, dependencies from the lockfile.
    const tree = join(tmp, "tree");
    mkdirSync(tree);
    execFileSync("sh", ["-c", `git archive --format=tar HEAD . | tar -x -C '${tree}'`], { cwd: PACKAGE, stdio: ["ignore", "pipe", "pipe"] });
    assert.ok(!readdirSync(tree).includes("dist"), "nothing built in the clean tree");
    // --ignore-scripts: npm pack runs prepare (the build) once below.
    run("npm", ["ci", "--ignore-scripts", ...INSTALL], tree);
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
    run("npm", ["install", ...INSTALL, join(tmp, packed[0].filename)], app);
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
    // skipLibCheck off: the shipped declarations are checked too (express-rate-limit is an optional peer).
    // The two resolutions run side by side (the test's run time).
    const tscBin = join(tree, "node_modules", "typescript", "bin", "tsc");
    const tsc = (module: string, resolution: string) =>
      promisify(execFile)("node", [tscBin, "--strict", "--noEmit", "--module", module, "--moduleResolution", resolution, "--target", "es2022", "--types", "node", "--typeRoots", join(tree, "node_modules", "@types"), "check.ts"], { cwd: app });
    await Promise.all([tsc("nodenext", "nodenext"), tsc("esnext", "bundler")]);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
