import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // `make test` wants one line per test file and the totals, not a progress display.
    reporters: [["default", { summary: false }]],
  },
});
