// ESLint (flat config) for the extension's TypeScript: the recommended rules of
// ESLint and typescript-eslint. `tsc` (strict) does the type checking; this
// catches what types do not (floating promises are `void`ed by convention).
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["extension/dist/**", "out/**", "node_modules/**", ".e2e/**", ".venv/**"] },
  {
    files: ["extension/src/**/*.ts", "extension/test/**/*.ts"],
    extends: [js.configs.recommended, ...tseslint.configs.recommended],
    rules: {
      // `_`-prefixed parameters are deliberately unused (callbacks with a fixed shape).
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
);
