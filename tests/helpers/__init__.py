"""Builders, case tables and runners shared by several test files (import them as
``from tests.helpers.<module> import ...``); test files never import each other."""
