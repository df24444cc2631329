import assert from "node:assert/strict";
import { test } from "node:test";
import { LOAD, MAGIC, firstMagic, planProfileCell } from "../src/cellPlan";

const code = (text: string) => ({ code: true, text });

test("the magic goes on top; a load cell above when no cell above loads the extension", () => {
  assert.deepEqual(planProfileCell([code("import torch"), code("y = f(x)")], 1), {
    prefix: `${MAGIC}\n`,
    insertLoad: true,
  });
  // loaded above (among other lines): no new cell
  const cells = [code(`import torch\n${LOAD}\n`), code("y = f(x)")];
  assert.deepEqual(planProfileCell(cells, 1), { prefix: `${MAGIC}\n`, insertLoad: false });
});

test("a load in a markdown cell or below the cell does not count", () => {
  const cells = [{ code: false, text: LOAD }, code("y = f(x)"), code(LOAD)];
  assert.equal(planProfileCell(cells, 1).insertLoad, true);
  assert.equal(planProfileCell([code("%load_ext trainium_lens_other"), code("y")], 1).insertLoad, true);
});

test("a cell already under the magic is only run; another cell magic is refused", () => {
  const cells = [code(LOAD), code(`\n${MAGIC} --steps 2:3\ny = f(x)`)];
  assert.deepEqual(planProfileCell(cells, 1), { prefix: "", insertLoad: false });
  assert.throws(() => planProfileCell([code("%%time\ny = f(x)")], 0), /%%time/);
  assert.throws(() => planProfileCell([{ code: false, text: "# Title" }], 0), /not a code cell/);
  assert.equal(firstMagic("x = 1\n%%time"), undefined);
});
