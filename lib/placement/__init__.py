"""Part I: device placement (environment, executors, placer, REINFORCE, evaluation)."""
