// ESLint, for one rule the type-checker cannot give: a promise nobody awaits, returns or hands to `void` (issue 42).
// A forgotten promise in this server is a call whose error is lost, or a release that runs after the answer it
// should precede; `@typescript-eslint/no-floating-promises` needs type information, so the rule runs type-aware
// over the same files as `tsc` (tsconfig.json). Run by test/unit/lint.test.ts (the fast tier).
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/", "dist/", ".cache/", "test/fixtures/", "npm/"] },
  {
    files: ["**/*.ts"],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { "@typescript-eslint": tseslint.plugin },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: { "@typescript-eslint/no-floating-promises": "error" },
  },
);
