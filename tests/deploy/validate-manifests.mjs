// Validates rendered Kubernetes manifests the way an API server with strict
// field validation would take them, without a cluster:
//  * built-in kinds against the official OpenAPI schemas (the kubernetes-models
//    package carries them as compiled validators), unknown fields included;
//  * CustomResourceDefinitions as objects, and custom resources against the
//    openAPIV3Schema of a CRD found among the inputs or in --crds files;
//  * what no schema can say: RBAC subjects and role references resolve, the
//    slice admission policy names the account the plugin pods run as, every
//    flag and environment variable given to an nvdra plugin or nvdra-webhook
//    exists in that program (from its --help), and the controller's
//    IMAGE_NAME is its image.
//
// Usage: node validate-manifests.mjs [--help-text container=FILE ...]
//                                    [--crds FILE ...] FILE|- ...
// Exit 0 when every object passes; 1 with one line per problem otherwise.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import yaml from 'js-yaml';
import Ajv from 'ajv';

const here = path.dirname(fileURLToPath(import.meta.url));
// Run from the directory that holds node_modules (check-manifests copies it there).
const modelsDir = path.join(here, 'node_modules', 'kubernetes-models');

const problems = [];
const problem = (where, msg) => problems.push(`${where}: ${msg}`);
const describe = (o) => `${o?.kind ?? '?'} ${o?.metadata?.namespace ? o.metadata.namespace + '/' : ''}${o?.metadata?.name ?? '?'}`;

// ---- inputs ----------------------------------------------------------------
const args = process.argv.slice(2);
const files = [];
const crdFiles = [];
const helpTexts = {};  // container name -> --help output of the binary it runs
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--crds') crdFiles.push(args[++i]);
  else if (args[i] === '--help-text') {
    const [ctr, file] = args[++i].split('=');
    helpTexts[ctr] = fs.readFileSync(file, 'utf8');
  } else files.push(args[i]);
}
const load = (f) => yaml.loadAll(fs.readFileSync(f === '-' ? 0 : f, 'utf8')).filter((d) => d != null);
const objects = files.flatMap((f) => load(f).map((o) => ({ o, src: f === '-' ? 'stdin' : f })));
const extraCrds = crdFiles.flatMap(load);
if (objects.length === 0) problem('input', 'no objects');

// ---- unknown-field tracking -----------------------------------------------
// The published schemas do not forbid extra properties, yet the API server
// rejects (strict) or silently drops (default) a misspelt field. The compiled
// validators read every property their schema declares, so wrapping the
// object in proxies shows which keys the schema knows: a key never read in an
// object whose schema read some keys is unknown. Objects whose keys are
// enumerated are maps; objects with no key read are free-form (RawExtension).
function track(value, p, records) {
  if (Array.isArray(value)) return value.map((v, i) => track(v, `${p}[${i}]`, records));
  if (value === null || typeof value !== 'object') return value;
  const rec = { path: p, keys: Object.keys(value), read: new Set(), enumerated: false };
  records.push(rec);
  const inner = {};
  for (const k of rec.keys) inner[k] = track(value[k], p ? `${p}.${k}` : k, records);
  return new Proxy(inner, {
    get(t, k, r) { if (typeof k === 'string') rec.read.add(k); return Reflect.get(t, k, r); },
    has(t, k) { if (typeof k === 'string') rec.read.add(k); return Reflect.has(t, k); },
    ownKeys(t) { rec.enumerated = true; return Reflect.ownKeys(t); },
  });
}

// kubernetes-models' JSONSchemaProps (the CRD schema type) lacks the
// properties the generator takes for annotations of its own; the API has them.
const jsonSchemaPropsExtra = new Set(['description', 'x-kubernetes-embedded-resource', 'x-kubernetes-int-or-string',
  'x-kubernetes-list-map-keys', 'x-kubernetes-list-type', 'x-kubernetes-map-type',
  'x-kubernetes-preserve-unknown-fields', 'x-kubernetes-validations']);
const knownAnyway = (p, k) => p.includes('openAPIV3Schema') && jsonSchemaPropsExtra.has(k);

function unknownFields(records) {
  const out = [];
  for (const r of records) {
    if (r.enumerated || r.read.size === 0) continue;
    for (const k of r.keys) if (!r.read.has(k) && !knownAnyway(r.path, k)) out.push(r.path ? `${r.path}.${k}` : k);
  }
  return out;
}

const ajvError = (e) => `${e.instancePath || '/'} ${e.keyword}${e.params ? ' ' + JSON.stringify(e.params) : ''}${e.message ? ' ' + e.message : ''}`;

// ---- built-in kinds ----------------------------------------------------------
const validators = new Map();
// kubernetes-models ships resource.k8s.io v1 only. A DeviceClass has the same
// fields in v1beta1 and v1beta2 (selectors, config, extendedResourceName), so
// the chart's beta DeviceClasses (resourceApiVersion, Kubernetes 1.32/1.33)
// are checked against v1's schema.
const schemaAliases = { 'resource.k8s.io/v1beta1/DeviceClass': 'resource.k8s.io/v1',
  'resource.k8s.io/v1beta2/DeviceClass': 'resource.k8s.io/v1' };
async function builtinValidator(apiVersion, kind) {
  const key = `${apiVersion}/${kind}`;
  if (validators.has(key)) return validators.get(key);
  if (schemaAliases[key]) {
    const v = await builtinValidator(schemaAliases[key], kind);
    validators.set(key, v);
    return v;
  }
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const modelFile = group ? path.join(modelsDir, group, version, `${kind}.js`) : path.join(modelsDir, version, `${kind}.js`);
  let v = null;
  if (fs.existsSync(modelFile)) {
    // The model module names its schema module; the schema module exports the validator.
    const m = /_schemas\/(\w+)\.js/.exec(fs.readFileSync(modelFile, 'utf8'));
    if (m) v = (await import(path.join(modelsDir, '_schemas', `${m[1]}.js`))).validate;
  }
  validators.set(key, v);
  return v;
}

async function validateBuiltin(obj, where) {
  const v = await builtinValidator(obj.apiVersion, obj.kind);
  if (!v) return false;
  const records = [];
  const alias = schemaAliases[`${obj.apiVersion}/${obj.kind}`];
  const ok = v(track(alias ? { ...obj, apiVersion: alias } : obj, '', records));
  if (!ok) for (const e of v.errors ?? []) problem(where, `schema: ${ajvError(e)}`);
  for (const f of unknownFields(records)) problem(where, `unknown field "${f}"`);
  return true;
}

// ---- custom resources --------------------------------------------------------
// A CRD's structural schema prunes fields it does not declare unless
// x-kubernetes-preserve-unknown-fields says otherwise: make that explicit.
function toJsonSchema(s) {
  if (Array.isArray(s)) return s.map(toJsonSchema);
  if (s === null || typeof s !== 'object') return s;
  const out = {};
  for (const [k, v] of Object.entries(s)) {
    if (k.startsWith('x-kubernetes-')) continue;
    out[k] = ['properties', 'patternProperties', 'definitions'].includes(k)
      ? Object.fromEntries(Object.entries(v).map(([pk, pv]) => [pk, toJsonSchema(pv)]))
      : toJsonSchema(v);
  }
  if (s.properties && s.additionalProperties === undefined && !s['x-kubernetes-preserve-unknown-fields']) {
    out.additionalProperties = false;
  }
  if (s['x-kubernetes-int-or-string']) { delete out.type; out.anyOf = [{ type: 'integer' }, { type: 'string' }]; }
  return out;
}

const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false });
const crdSchemas = new Map();  // "group/version/Kind" -> compiled validator
function addCrd(crd) {
  for (const ver of crd?.spec?.versions ?? []) {
    const schema = ver?.schema?.openAPIV3Schema;
    if (!schema || !ver.served) continue;
    const s = toJsonSchema(schema);
    // metadata is checked against ObjectMeta below, as the API server does.
    if (s.properties) s.properties.metadata = { type: 'object' };
    crdSchemas.set(`${crd.spec.group}/${ver.name}/${crd.spec.names.kind}`, ajv.compile(s));
  }
}
for (const c of extraCrds) addCrd(c);
for (const { o } of objects) if (o.kind === 'CustomResourceDefinition') addCrd(o);

async function validateCustom(obj, where) {
  const v = crdSchemas.get(`${obj.apiVersion}/${obj.kind}`);
  if (!v) return false;
  if (!v(obj)) for (const e of v.errors) problem(where, `CRD schema: ${ajvError(e)}`);
  const meta = (await import(path.join(modelsDir, '..', '@kubernetes-models', 'apimachinery', '_schemas',
    'IoK8sApimachineryPkgApisMetaV1ObjectMeta.js'))).validate;
  const records = [];
  if (!meta(track(obj.metadata ?? {}, 'metadata', records))) for (const e of meta.errors) problem(where, `metadata: ${ajvError(e)}`);
  for (const f of unknownFields(records)) problem(where, `unknown field "${f}"`);
  return true;
}

// ---- cross-object checks -------------------------------------------------------
const podSpecOf = (o) => (o.kind === 'Pod' ? o.spec : o.spec?.template?.spec);
const saUser = (ns, name) => `system:serviceaccount:${ns}:${name}`;

function crossChecks() {
  const all = objects.map(({ o }) => o);
  const find = (kind, name, ns) => all.find((o) => o.kind === kind && o.metadata?.name === name && (ns === undefined || o.metadata?.namespace === ns));
  const accounts = new Set(all.filter((o) => o.kind === 'ServiceAccount').map((o) => saUser(o.metadata.namespace, o.metadata.name)));
  const namespaces = new Set(all.filter((o) => o.kind === 'Namespace').map((o) => o.metadata.name));

  for (const o of all) {
    const where = describe(o);
    if (o.metadata?.namespace && namespaces.size > 0 && !namespaces.has(o.metadata.namespace) && o.metadata.namespace !== 'default') {
      problem(where, `namespace "${o.metadata.namespace}" is not among the manifests`);
    }
    if (o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding') {
      const ref = o.roleRef ?? {};
      if (!find(ref.kind, ref.name, ref.kind === 'Role' ? o.metadata.namespace : undefined)) {
        problem(where, `roleRef ${ref.kind} ${ref.name} is not among the manifests`);
      }
      for (const s of o.subjects ?? []) {
        if (s.kind === 'ServiceAccount' && !accounts.has(saUser(s.namespace ?? o.metadata.namespace, s.name))) {
          problem(where, `subject ServiceAccount ${s.namespace}/${s.name} is not among the manifests`);
        }
      }
    }
    const pod = podSpecOf(o);
    if (pod && o.kind !== 'Pod' && pod.serviceAccountName && !accounts.has(saUser(o.metadata.namespace, pod.serviceAccountName))) {
      problem(where, `serviceAccountName ${pod.serviceAccountName} is not among the manifests`);
    }
  }

  // The slice policy must name the account the nvdra plugin pods run as.
  const pluginSets = all.filter((o) => o.kind === 'DaemonSet' &&
    (podSpecOf(o)?.containers ?? []).some((c) => (c.command ?? []).some((w) => /nvdra-.*kubelet-plugin/.test(w))));
  const pluginUsers = pluginSets.map((o) => saUser(o.metadata.namespace, podSpecOf(o).serviceAccountName ?? 'default'));
  for (const p of all.filter((o) => o.kind === 'ValidatingAdmissionPolicy')) {
    const named = (p.spec?.matchConditions ?? []).flatMap((c) => [...(c.expression ?? '').matchAll(/system:serviceaccount:[\w.-]+:[\w.-]+/g)].map((m) => m[0]));
    if (named.length === 0) problem(describe(p), 'matches no service account');
    for (const u of named) {
      if (!pluginUsers.includes(u)) problem(describe(p), `matches ${u}, but the kubelet plugin pods run as ${pluginUsers.join(', ') || 'nothing'}`);
    }
    if (!all.some((b) => b.kind === 'ValidatingAdmissionPolicyBinding' && b.spec?.policyName === p.metadata.name)) {
      problem(describe(p), 'has no ValidatingAdmissionPolicyBinding');
    }
  }
  if (pluginSets.length > 0 && !all.some((o) => o.kind === 'ValidatingAdmissionPolicy')) {
    problem('manifests', 'the kubelet plugins are deployed without the ResourceSlice admission policy');
  }

  // Flags and environment given to the nvdra plugins and nvdra-webhook must
  // exist in them.
  const runtimeEnv = new Set(['NVIDIA_VISIBLE_DEVICES', 'NVIDIA_MIG_CONFIG_DEVICES']);
  const webhooks = all.filter((o) => o.kind === 'Deployment' &&
    (podSpecOf(o).containers ?? []).some((c) => (c.command ?? [])[0] === 'nvdra-webhook'));
  for (const ds of [...pluginSets, ...webhooks]) {
    for (const c of podSpecOf(ds).containers) {
      const help = helpTexts[c.name];
      if (help === undefined) continue;
      const where = `${describe(ds)} container ${c.name}`;
      const known = new Set([...help.matchAll(/(?:^|[\s,])(--?[\w-]+)/g)].map((m) => m[1]));
      const envKnown = new Set([...help.matchAll(/\(Env:([A-Z0-9_]+)\)/g)].map((m) => m[1]));
      const words = [...(c.command ?? []).slice(1), ...(c.args ?? [])];
      for (const w of words) {
        const flag = /^(--?[a-zA-Z][\w-]*)/.exec(w)?.[1];
        if (flag && !known.has(flag)) problem(where, `flag ${flag} does not exist in ${c.command[0]}`);
      }
      const referenced = new Set(words.flatMap((w) => [...w.matchAll(/\$\((\w+)\)/g)].map((m) => m[1])));
      for (const e of c.env ?? []) {
        if (!envKnown.has(e.name) && !referenced.has(e.name) && !runtimeEnv.has(e.name)) {
          problem(where, `environment variable ${e.name} is read by nothing in ${c.command[0]}`);
        }
      }
      for (const r of referenced) {
        if (!(c.env ?? []).some((e) => e.name === r)) problem(where, `$(${r}) is used but not set`);
      }
    }
  }

  // The ComputeDomain controller hands IMAGE_NAME to the daemons it starts.
  for (const d of all.filter((o) => o.kind === 'Deployment')) {
    for (const c of podSpecOf(d).containers ?? []) {
      const img = (c.env ?? []).find((e) => e.name === 'IMAGE_NAME');
      if (img && img.value !== c.image) problem(`${describe(d)} container ${c.name}`, `IMAGE_NAME ${img.value} differs from image ${c.image}`);
    }
  }
}

// ---- run -----------------------------------------------------------------------
for (const { o, src } of objects) {
  const where = `${src}: ${describe(o)}`;
  if (typeof o !== 'object' || !o.apiVersion || !o.kind) { problem(where, 'not a Kubernetes object (apiVersion and kind)'); continue; }
  if (await validateBuiltin(o, where)) continue;
  if (await validateCustom(o, where)) continue;
  problem(where, `no schema for ${o.apiVersion} ${o.kind}`);
}
crossChecks();

if (problems.length) {
  for (const p of problems) console.log(p);
  console.log(`${problems.length} problem(s) in ${objects.length} object(s)`);
  process.exit(1);
}
console.log(`${objects.length} object(s) valid`);
