// ESLint for the page's ES modules (static/js; `make lint-js`). The recommended rules, and
// the few that keep the page's habits: no var, === everywhere, no shadowed or unused
// name, no user string as HTML (the page builds its DOM with dom.js's el()).
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["static/vendor/**", "node_modules/**", ".tools/**", ".venv*/**"] },
  js.configs.recommended,
  {
    files: ["static/js/**/*.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: { ...globals.browser },
    },
    rules: {
      "no-var": "error",
      "prefer-const": "error",
      eqeqeq: ["error", "always", { null: "ignore" }],
      "no-shadow": "error",
      "no-unused-vars": ["error", { args: "after-used", argsIgnorePattern: "^_",
        varsIgnorePattern: "^_", ignoreRestSiblings: true }],
      "no-implied-eval": "error",
      "no-new-func": "error",
      "no-restricted-properties": ["error",
        { property: "innerHTML", message: "build the DOM with el() (dom.js): no string as HTML" },
        { property: "outerHTML", message: "build the DOM with el() (dom.js): no string as HTML" }],
      "no-restricted-syntax": ["error",
        { selector: "CallExpression[callee.property.name='insertAdjacentHTML']",
          message: "build the DOM with el() (dom.js): no string as HTML" }],
    },
  },
];
