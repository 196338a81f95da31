// The Node example on the repository README's first screen, run as written:
// transpiled with the package's own TypeScript, imported from inside the
// package (so `redis-ratelimit` resolves to this build), with its
// `createClient()` pointed at the test server.
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";
import { Server } from "./harness.js";

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const README = join(PACKAGE, "..", "..", "README.md");

type Check = (apiKey: string) => Promise<[number, Record<string, string>]>;

function readmeExample(): string {
  const found = /```ts\n([\s\S]*?)```/.exec(readFileSync(README, "utf8"));
  assert.ok(found?.[1] !== undefined, "no TypeScript example in README.md");
  return found[1];
}

let server: Server;
before(async () => {
  server = await Server.start();
});
after(async () => {
  await server.stop();
});

test("the README's Node parts fit one screen, the README 600 lines", () => {
  const lines = readFileSync(README, "utf8").split("\n");
  if (lines.at(-1) === "") lines.pop();
  assert.ok(lines.length <= 600, `README.md has ${lines.length} lines`);
  // The example under "**Node**", up to the next language's.
  const example = lines.findIndex((l) => l.startsWith("**Node**"));
  const exampleEnd = lines.findIndex((l, i) => i > example && l.startsWith("**Rust**"));
  assert.ok(example > 0 && exampleEnd > example, "no Node example");
  assert.ok(exampleEnd - example <= 40, `the Node example takes ${exampleEnd - example} lines`);
  // The "## Node client" section, up to the next section.
  const section = lines.indexOf("## Node client");
  const sectionEnd = lines.findIndex((l, i) => i > section && l.startsWith("## "));
  assert.ok(section > 0 && sectionEnd > section, "no Node client section");
  assert.ok(sectionEnd - section <= 40, `the Node client section takes ${sectionEnd - section} lines`);
});

test("the README example type-checks with tsc --strict", () => {
  const dir = join(PACKAGE, "build", "readme-check");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, "example.ts");
  writeFileSync(file, readmeExample());
  try {
    const program = ts.createProgram([file], {
      strict: true,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      types: ["node"],
      skipLibCheck: true,
      noEmit: true,
    });
    const errors = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
    assert.deepEqual(errors, []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the README example limits to 100 per minute per API key, with Retry-After", async () => {
  const source = readmeExample();
  assert.ok(source.includes("createClient()"), "the example connects with createClient()");
  const pointed = source.replace("createClient()", `createClient({ url: ${JSON.stringify(server.url)} })`);
  const { outputText } = ts.transpileModule(pointed, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  });
  const file = join(PACKAGE, "build", "readme-example.mjs");
  // The test closes the example's connection when done.
  writeFileSync(file, `${outputText}\nexport { redis as readmeRedis };\n`);
  const example = (await import(pathToFileURL(file).href)) as { check: Check; readmeRedis: { quit(): Promise<unknown> } };
  try {
    const statuses = [];
    for (let i = 0; i < 100; i++) statuses.push((await example.check("alice"))[0]);
    assert.deepEqual(statuses, Array<number>(100).fill(200)); // the burst: the limit, at once
    const [status, headers] = await example.check("alice");
    assert.equal(status, 429);
    assert.equal(headers["retry-after"], "1"); // 600 ms, rounded up
    assert.match(headers["ratelimit-policy"] ?? "", /q=100;w=60/);
    assert.equal((await example.check("bob"))[0], 200); // one key per API key
  } finally {
    await example.readmeRedis.quit();
    rmSync(file, { force: true });
  }
});
