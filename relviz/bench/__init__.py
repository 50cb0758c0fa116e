"""``python -m relviz bench``'s sections: timings and memory of the library against the references
and the alternatives a user would pick. No library module imports this package."""
