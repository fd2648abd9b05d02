"""The data tier and the rollout manager: prompt, partial-response and experience pools; repack."""
