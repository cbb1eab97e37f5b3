/**
 * deploy/kubernetes/ checked offline (issue 44: no API server, no registry on the test machines):
 * - `kubectl kustomize` renders every overlay, and each overlay with each runtime component (gVisor, Kata);
 * - every rendered object validates against agent-sandbox's own CRD schemas (v1beta1, the served storage version),
 *   kept in ./agent-sandbox-crds/ (kubernetes-sigs/agent-sandbox helm/crds/ at the commit ./agent-sandbox-crds/SOURCE.md
 *   names). The validator is ./structural.ts: a small structural check (types, required, enums, patterns,
 *   int-or-string, and — unlike a plain JSON-schema validator — unknown fields refused, since the API server would
 *   prune them silently). The CRDs embed Kubernetes' own PodSpec and PersistentVolumeClaimSpec schemas, so the pod
 *   is checked against those too;
 * - the sandbox pod passes the restricted Pod Security Standard (./pss.ts: the standard's rules as a table);
 * - nothing secret is rendered (no Secret object, no data), probes hit /readyz, identity is late-bound.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { ROOT } from "../helpers/binary.ts";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { restrictedViolations, RESTRICTED_RULES } from "./pss.ts";
import { crdSchemas, validate } from "./structural.ts";

const KUBE = join(ROOT, "deploy", "kubernetes");
const CRDS = join(import.meta.dir, "agent-sandbox-crds");
type Obj = Record<string, any>;

/** `kubectl kustomize DIR` parsed into objects. */
function render(dir: string): Obj[] {
  const r = Bun.spawnSync(["kubectl", "kustomize", "--load-restrictor", "LoadRestrictionsNone", dir], { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`kubectl kustomize ${dir}: ${r.stderr.toString()}`);
  return (Bun.YAML.parse(r.stdout.toString()) as Obj | Obj[] as Obj[]).filter((o) => o !== null);
}

/** The overlays, and each with each runtime component (a kustomization made for the test). */
function variants(): [string, () => Obj[]][] {
  const out: [string, () => Obj[]][] = [];
  for (const overlay of ["exec-server", "mcp-http"]) {
    out.push([overlay, () => render(join(KUBE, "overlays", overlay))]);
    for (const component of ["gvisor", "kata"])
      out.push([
        `${overlay} + ${component}`,
        () => {
          const dir = mkdtempSync(join(CONF_BASE, "kustomize-"));
          try {
            writeFileSync(
              join(dir, "kustomization.yaml"),
              `resources:\n  - ${relative(dir, join(KUBE, "overlays", overlay))}\ncomponents:\n  - ${relative(dir, join(KUBE, "components", component))}\n`,
            );
            return render(dir);
          } finally {
            rmSync(dir, { recursive: true, force: true });
          }
        },
      ]);
  }
  return out;
}

describe.skipIf(skipWithout("deploy/kubernetes rendering", toolMissing("kubectl")))("deploy/kubernetes", () => {
  const schemas = crdSchemas(
    readdirSync(CRDS)
      .filter((f) => f.endsWith(".yaml"))
      .map((f) => readFileSync(join(CRDS, f), "utf8")),
  );

  test("the pinned CRDs are agent-sandbox's four v1beta1 kinds", () => {
    expect([...schemas.keys()].sort()).toEqual([
      "agents.x-k8s.io/v1beta1/Sandbox",
      "extensions.agents.x-k8s.io/v1beta1/SandboxClaim",
      "extensions.agents.x-k8s.io/v1beta1/SandboxTemplate",
      "extensions.agents.x-k8s.io/v1beta1/SandboxWarmPool",
    ]);
  });

  test("the structural check is not vacuous: it refuses a typo, a wrong enum, a missing required field", () => {
    const s = schemas.get("extensions.agents.x-k8s.io/v1beta1/SandboxWarmPool")!;
    const ok = {
      apiVersion: "extensions.agents.x-k8s.io/v1beta1",
      kind: "SandboxWarmPool",
      metadata: { name: "x" },
      spec: { sandboxTemplateRef: { name: "t" } },
    };
    expect(validate(s, ok)).toEqual([]);
    expect(validate(s, { ...ok, spec: { sandboxTemplateRef: { name: "t" }, replica: 2 } })).toEqual(["spec.replica: unknown field"]);
    expect(validate(s, { ...ok, spec: { sandboxTemplateRef: { name: "t" }, updateStrategy: { type: "Rolling" } } })[0]).toContain(
      "not one of",
    );
    expect(validate(s, { ...ok, spec: {} })).toEqual(["spec.sandboxTemplateRef: required"]);
    const t = schemas.get("extensions.agents.x-k8s.io/v1beta1/SandboxTemplate")!;
    const pod = { containers: [{ name: "c", image: "i", securityContext: { runAsNonRoot: "yes" } }] };
    expect(validate(t, { ...ok, kind: "SandboxTemplate", spec: { podTemplate: { spec: pod } } })).toEqual([
      "spec.podTemplate.spec.containers[0].securityContext.runAsNonRoot: expected boolean",
    ]);
  });

  test("the restricted Pod Security Standard table is not vacuous: a baseline pod breaks its rules", () => {
    const names = restrictedViolations({
      containers: [{ name: "c", image: "i" }],
      hostNetwork: true,
      volumes: [{ name: "h", hostPath: { path: "/" } }],
    }).map((v) => v.split(":")[0]);
    expect(names).toEqual([
      "hostNamespaces",
      "hostPathVolumes",
      "volumeTypes",
      "privilegeEscalation",
      "runAsNonRoot",
      "seccompProfile",
      "capabilities",
    ]);
    expect(RESTRICTED_RULES.length).toBeGreaterThanOrEqual(14);
  });

  for (const [name, make] of variants())
    test(`${name}: renders; every object matches its CRD; the pod passes the restricted PSS`, () => {
      const objs = make();
      expect(objs.map((o) => o.kind).sort()).toEqual(["SandboxClaim", "SandboxTemplate", "SandboxWarmPool"]);
      for (const o of objs) {
        const [group, version] = String(o.apiVersion).split("/");
        const schema = schemas.get(`${group}/${version}/${o.kind}`);
        expect(schema).toBeDefined();
        expect(validate(schema!, o).map((e) => `${o.kind}/${o.metadata.name}: ${e}`)).toEqual([]);
      }
      const template = objs.find((o) => o.kind === "SandboxTemplate")!;
      const pool = objs.find((o) => o.kind === "SandboxWarmPool")!;
      const claim = objs.find((o) => o.kind === "SandboxClaim")!;
      expect(pool.spec.sandboxTemplateRef.name).toBe(template.metadata.name);
      expect(claim.spec.warmPoolRef.name).toBe(pool.metadata.name);
      const pod = template.spec.podTemplate.spec;
      expect(restrictedViolations(pod)).toEqual([]);
      const c = pod.containers[0];
      expect(c.securityContext.readOnlyRootFilesystem).toBe(true);
      expect(c.readinessProbe.httpGet.path).toBe("/readyz");
      expect(c.livenessProbe.httpGet.path).toBe("/readyz");
      expect(c.resources.requests.cpu).toBeDefined();
      expect(c.resources.limits.memory).toBeDefined();
      expect(template.spec.volumeClaimTemplates.map((v: Obj) => v.metadata.name)).toContain("workspace");
      expect(c.volumeMounts.find((m: Obj) => m.name === "workspace").mountPath).toBe("/workspace");
      // Default deny: the template's managed policy lists only the router in, DNS and the egress proxy out.
      expect(template.spec.networkPolicyManagement).toBe("Managed");
      expect(template.spec.networkPolicy.egress.flatMap((e: Obj) => e.ports.map((p: Obj) => p.port)).sort()).toEqual([3128, 53, 53]);
      // Late-bound identity: no env injection by claims (a cold start), the pod's own name as the token audience.
      expect(template.spec.envVarsInjectionPolicy).toBe("Disallowed");
      expect(claim.spec.env).toBeUndefined();
      expect(c.env.find((e: Obj) => e.name === "SANDBOX_NAME").valueFrom.fieldRef.fieldPath).toBe("metadata.name");
      // The secret: referenced, mounted 0440 for the fsGroup, never rendered.
      expect(pod.volumes.find((v: Obj) => v.name === "auth").secret).toEqual({ secretName: "shellmcp-auth", defaultMode: 0o440 });
      expect(pod.securityContext.fsGroup).toBe(65532);
      expect(objs.some((o) => o.kind === "Secret" || "data" in o || "stringData" in o)).toBe(false);
      if (name.includes("gvisor")) expect(pod.runtimeClassName).toBe("gvisor");
      else if (name.includes("kata")) expect(pod.runtimeClassName).toBe("kata");
      else expect(pod.runtimeClassName).toBeUndefined();
      if (name.startsWith("exec-server")) {
        expect(c.args.slice(0, 3)).toEqual(["exec-server", "--listen", "ws://0.0.0.0:8080"]);
        expect(c.args.join(" ")).toContain("--ws-auth signed-bearer-token --ws-shared-secret-file /run/secrets/shellmcp/ws-secret");
        expect(c.args.join(" ")).toContain("--ws-audience $(SANDBOX_NAME)");
      } else {
        expect(c.args.slice(0, 3)).toEqual(["serve", "--listen", "http://0.0.0.0:8080/mcp"]);
        // The same late-bound identity as the exec-server's: a token for this pod only.
        expect(c.args.join(" ")).toContain("--auth signed-bearer-token");
        expect(c.args.join(" ")).toContain("--auth-audience $(SANDBOX_NAME)");
      }
    });
});
