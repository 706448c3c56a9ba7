import { describe, expect, it } from "@effect/vitest"
import { splitStatements } from "../../src/db/sqlStatements.ts"

describe("splitStatements", () => {
  it("splits on semicolons and drops empty and comment-only pieces", () => {
    expect(splitStatements("CREATE TABLE a (x);\n-- note\nCREATE TABLE b (y);\n;\n-- trailing comment\n")).toEqual([
      "CREATE TABLE a (x)",
      "-- note\nCREATE TABLE b (y)"
    ])
  })

  it("keeps semicolons inside strings, identifiers and comments", () => {
    const script = `INSERT INTO t VALUES ('a;b', 'it''s; fine');
SELECT "odd;name", [br;acket], \`back;tick\` FROM t /* a ; comment */;
-- a; line comment
SELECT 1`
    expect(splitStatements(script)).toEqual([
      "INSERT INTO t VALUES ('a;b', 'it''s; fine')",
      "SELECT \"odd;name\", [br;acket], `back;tick` FROM t /* a ; comment */",
      "-- a; line comment\nSELECT 1"
    ])
  })

  it("keeps a trigger's BEGIN ... END body, with CASE ... END inside, in one statement", () => {
    const trigger = `CREATE TEMP TRIGGER IF NOT EXISTS t_audit AFTER INSERT ON t BEGIN
  INSERT INTO log VALUES (new.x);
  UPDATE t SET y = CASE WHEN new.x > 1 THEN 'big' ELSE 'small' END WHERE x = new.x;
END`
    expect(splitStatements(`${trigger};\nCREATE TABLE after_trigger (z);`)).toEqual([trigger, "CREATE TABLE after_trigger (z)"])
  })

  it("does not treat a transaction's BEGIN as a block", () => {
    expect(splitStatements("BEGIN; CREATE TABLE a (x); COMMIT;")).toEqual(["BEGIN", "CREATE TABLE a (x)", "COMMIT"])
  })
})
