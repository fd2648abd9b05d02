"""The real system on Ray: rollouts, trainer, relays, data pools, rollout manager."""
