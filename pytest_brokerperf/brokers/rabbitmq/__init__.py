"""rabbitmq."""
