"""The contract's I/O: scenario, resolved deployment, plan, errors, schema, CLI, commands."""
