"""The catalogue of Kafka configs exactly knows: topic configs (`topic.py`), broker configs (`broker.py`),
and what a config is (`definition.py`: types, sources, parsing and validation). DescribeConfigs,
CreateTopics, AlterConfigs, IncrementalAlterConfigs, `LogConfig` and `BrokerConfig` all read it."""

from exactly.configs.broker import BROKER_CONFIGS, synonym_group
from exactly.configs.definition import ConfigDef, ConfigSource, ConfigType, OneOf, Range, Synonym
from exactly.configs.topic import TOPIC_CONFIGS, broker_default, topic_config, validate_topic_overrides

__all__ = [
    "BROKER_CONFIGS",
    "TOPIC_CONFIGS",
    "ConfigDef",
    "ConfigSource",
    "ConfigType",
    "OneOf",
    "Range",
    "Synonym",
    "broker_default",
    "synonym_group",
    "topic_config",
    "validate_topic_overrides",
]
