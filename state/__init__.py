"""Pure-Python group state machine (no Spark, no pandas): mirrors Kafka's GroupMetadata."""
