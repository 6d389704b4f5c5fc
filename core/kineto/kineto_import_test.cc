// Placeholder until the real fixtures land; replaced by the fixture tests.
