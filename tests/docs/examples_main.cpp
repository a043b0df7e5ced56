// docs_examples is built, never run: linking it proves the documentation's
// examples (doc_examples.cpp, generated) name only what npf::npf exports.
int main() { return 0; }
