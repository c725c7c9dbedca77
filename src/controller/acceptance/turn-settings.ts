/**
 * The effective model, autonomy and reasoning effort of a new turn, resolved
 * once at acceptance (spec "Launch defaults and follow-up inheritance").
 * Pure: the live catalog and host policy are inputs.
 */
import type { CatalogModel } from '../../droid/client.js';
import type { Autonomy } from '../../droid/permission-policy.js';
import type { EffectiveSettings } from '../../shared/records.js';
import { autonomyAtMost, looksFast } from '../../config/schema.js';
import { ControllerError } from '../../shared/public-error.js';

export interface LaunchDefaults {
  defaultModel: string | null;
  defaultAutonomy: Autonomy;
  maxAutonomy: Autonomy;
  reasoningEffort: string | null;
}

export interface Requested {
  model?: string;
  autonomy?: Autonomy;
  reasoningEffort?: string;
}

function capAutonomy(level: Autonomy, ceiling: Autonomy): Autonomy {
  return autonomyAtMost(level, ceiling) ? level : ceiling;
}

function findModel(catalog: readonly CatalogModel[], id: string, how: string): CatalogModel {
  const model = catalog.find((m) => m.id === id);
  if (!model) {
    throw new ControllerError(
      'model_unavailable',
      `model ${JSON.stringify(id)} (${how}) is not in the live catalog`,
      'Call droid_models and pass one of the listed ids as `model`.',
    );
  }
  return model;
}

function supports(model: CatalogModel, effort: string | null | undefined): effort is string {
  return typeof effort === 'string' && (model.supportedReasoningEfforts ?? []).includes(effort);
}

/**
 * @param previous the session's last accepted settings (send only); queued
 * work counts, so FIFO follow-ups inherit from the turn queued before them.
 */
export function resolveLaunchSettings(
  requested: Requested,
  previous: EffectiveSettings | null,
  host: LaunchDefaults,
  catalog: readonly CatalogModel[],
): EffectiveSettings {
  // Autonomy first: a ceiling violation is the most important thing to say.
  if (requested.autonomy && !autonomyAtMost(requested.autonomy, host.maxAutonomy)) {
    throw new ControllerError(
      'autonomy_above_ceiling',
      `autonomy ${requested.autonomy} is above this host's ceiling (${host.maxAutonomy})`,
      `Pass an autonomy of at most ${host.maxAutonomy}; the ceiling is an operator setting (maxAutonomy).`,
    );
  }
  const autonomy = requested.autonomy ?? (previous ? capAutonomy(previous.autonomy, host.maxAutonomy) : host.defaultAutonomy);

  let model: CatalogModel;
  if (requested.model !== undefined) model = findModel(catalog, requested.model, 'requested');
  else if (previous) model = findModel(catalog, previous.model, "the session's last model");
  else if (host.defaultModel) {
    model = findModel(catalog, host.defaultModel, 'host default');
    const name = `${model.displayName ?? ''} ${model.shortDisplayName ?? ''}`;
    if (looksFast(name)) {
      throw new ControllerError(
        'model_unavailable',
        `the host default model is a Fast variant (${model.displayName}) and is not used automatically`,
        'Pass `model` explicitly, or ask the operator to set defaultModel to a standard model.',
      );
    }
  } else {
    throw new ControllerError(
      'model_required',
      'no model was given and this host has no defaultModel',
      'Pass `model` (see droid_models), or ask the operator to set defaultModel.',
    );
  }

  const reasoningEffort = resolveEffort(requested.reasoningEffort, model, previous, host);
  return { model: model.id, autonomy, reasoningEffort };
}

function resolveEffort(explicit: string | undefined, model: CatalogModel, previous: EffectiveSettings | null, host: LaunchDefaults): string | null {
  const supported = model.supportedReasoningEfforts ?? [];
  if (explicit !== undefined) {
    if (supports(model, explicit)) return explicit;
    throw new ControllerError(
      'reasoning_unsupported',
      `model ${model.id} does not support reasoning effort ${JSON.stringify(explicit)}; it supports: ${supported.join(', ') || 'none listed'}`,
      'Pass one of the supported efforts, or omit reasoningEffort.',
    );
  }
  // A model change never carries the old model's effort.
  if (previous && previous.model === model.id && supports(model, previous.reasoningEffort)) return previous.reasoningEffort;
  if (supports(model, host.reasoningEffort)) return host.reasoningEffort;
  if (supports(model, model.defaultReasoningEffort)) return model.defaultReasoningEffort;
  if (previous && previous.model !== model.id) {
    throw new ControllerError(
      'reasoning_required',
      `no supported reasoning effort is known for model ${model.id}`,
      'Pass reasoningEffort explicitly (see droid_models for what the model supports).',
    );
  }
  return null;
}
