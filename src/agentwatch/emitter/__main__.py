from agentwatch.emitter.hook import main

main()
