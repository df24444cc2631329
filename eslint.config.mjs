// ESLint (flat config) for the extension's TypeScript: ESLint's and typescript-eslint's
// recommended rules, type-aware (parserOptions.project: the rules read tsc's types).
// `tsc` (strict) does the type checking; these catch what types allow but is a bug:
// a promise nobody awaits or handles (no-floating-promises: `void` one on purpose), a
// promise where a callback's result is ignored (no-misused-promises), `await` on a
// value that is not a promise (await-thenable).
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["extension/dist/**", "out/**", "node_modules/**", ".e2e/**", ".venv/**"] },
  {
    files: ["extension/src/**/*.ts", "extension/test/**/*.ts"],
    extends: [js.configs.recommended, ...tseslint.configs.recommended],
    languageOptions: {
      parserOptions: { project: "./tsconfig.json", tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // `_`-prefixed parameters are deliberately unused (callbacks with a fixed shape).
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      // node:test's test() returns a promise the runner itself awaits.
      "@typescript-eslint/no-floating-promises": [
        "error",
        { allowForKnownSafeCalls: [{ from: "package", name: ["test", "describe"], package: "node:test" }] },
      ],
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      "@typescript-eslint/require-await": "error",
      "@typescript-eslint/no-unnecessary-type-assertion": "error",
      "@typescript-eslint/no-for-in-array": "error",
      "@typescript-eslint/only-throw-error": "error",
      "@typescript-eslint/prefer-promise-reject-errors": "error",
      "@typescript-eslint/return-await": ["error", "in-try-catch"],
    },
  },
);
