"""Preference (SPEC §4.6–4.7): corrections, regenerations and ratings →
preference pairs (`pairs`, near-identical prompts found by `pairs.neighbors`) → one DPO policy
per tenant (`dpo`) → refined skill templates (`templates`). Templates import the policy, never
the reverse: the prompt format a policy sees is `dpo.settings.format_prompt`."""
