/**
 * The danger heuristic (src/escalate/decision/heuristics.ts): Codex 0.97's `command_might_be_dangerous`, the fallback that
 * turns an exec no rule matched into a prompt. Cases: what 0.97 was observed to prompt for and to let through
 * (docs/escalation.md, "The danger heuristic").
 */
import { describe, expect, test } from "bun:test";
import { commandMightBeDangerous } from "../../src/escalate/decision/heuristics.ts";

const dangerous = (s: string) => commandMightBeDangerous(s.split(" "));

describe("commandMightBeDangerous", () => {
  test.each([
    "git reset --hard",
    "git rm --cached x",
    "git -C . reset",
    "git -c core.pager=cat reset",
    "git --git-dir .git --work-tree . rm f",
    "/usr/bin/git reset",
    "git branch -D x",
    "git branch -d x",
    "git branch --delete x",
    "git branch --delete=x",
    "git branch -vd x",
    "git push --force",
    "git push --force-with-lease",
    "git push --force-with-lease=main",
    "git push --force-if-includes",
    "git push --delete origin x",
    "git push -f",
    "git push -uf origin main",
    "git push origin +main",
    "git push origin :old",
    "git clean -fdx",
    "git clean --force",
    "rm -rf p",
    "rm -f p",
    "sudo rm -rf /",
    "sudo git reset --hard",
  ])("prompts: %s", (c) => expect(dangerous(c)).toBe(true));

  test.each([
    "git status",
    "git -C reset status", // -C consumes the next token, so the subcommand is `status`
    "git --git-dir=.git status",
    "git branch x",
    "git branch -v",
    "git push origin main",
    "git push origin +", // a bare `+` is not a forced refspec (length 1)
    "git clean -n",
    "git log --reset",
    "rm -r p",
    "rm --force p",
    "rm p -f",
    "rm -- -f",
    "rm -fr p", // 0.97 only knew `-f` and `-rf`
    "find . -delete",
    "ls",
    "sudo ls",
  ])("lets through: %s", (c) => expect(dangerous(c)).toBe(false));

  test("empty command is not dangerous", () => expect(commandMightBeDangerous([])).toBe(false));

  test("a nested shell's plain script is judged command by command", () => {
    expect(commandMightBeDangerous(["bash", "-lc", "git status && git reset --hard"])).toBe(true);
    expect(commandMightBeDangerous(["zsh", "-c", "ls; rm -rf build"])).toBe(true);
    expect(commandMightBeDangerous(["sh", "-c", "echo a | git push --force"])).toBe(true);
    expect(commandMightBeDangerous(["bash", "-c", "git status || ls"])).toBe(false);
  });

  test("a nested script with anything beyond words and && || ; | is not looked into", () => {
    expect(commandMightBeDangerous(["bash", "-c", "$(echo rm) -rf x"])).toBe(false);
    expect(commandMightBeDangerous(["bash", "-c", "rm -rf x > log"])).toBe(false);
    expect(commandMightBeDangerous(["bash", "-c", "rm -rf 'unterminated"])).toBe(false);
  });

  test("only -c/-lc scripts of bash, zsh and sh are looked into", () => {
    expect(commandMightBeDangerous(["bash", "script.sh", "rm -rf x"])).toBe(false);
    expect(commandMightBeDangerous(["fish", "-c", "rm -rf x"])).toBe(false);
    expect(commandMightBeDangerous(["bash", "-c"])).toBe(false);
  });
});
