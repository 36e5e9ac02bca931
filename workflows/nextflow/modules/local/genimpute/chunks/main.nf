process GENIMPUTE_CHUNKS {
    tag "$meta.id"
    label 'process_single'
    container 'genimpute:0.2.0'

    input:
    tuple val(meta), path(panel)
    val size

    output:
    tuple val(meta), path("${meta.id}_chunks.txt"), emit: chunks
    path "versions.yml"                           , emit: versions

    when:
    task.ext.when == null || task.ext.when

    script:
    """
    genimpute chunks --ref ${panel} --size ${size} --out ${meta.id}_chunks.txt

    cat <<-END_VERSIONS > versions.yml
    "${task.process}":
        genimpute: \$(genimpute --version | sed 's/^genimpute, version //')
    END_VERSIONS
    """

    stub:
    """
    echo '1' > ${meta.id}_chunks.txt
    echo '"${task.process}": {genimpute: 0.2.0}' > versions.yml
    """
}
