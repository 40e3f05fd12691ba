"""A scenario (the contract's input) validated and resolved into a Deployment: presets, engine and defaults
looked up."""
